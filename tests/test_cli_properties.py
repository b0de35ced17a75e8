"""Generated hostile command lines: never a traceback, one line on stderr, nothing written.

Example::

    pytest tests/test_cli_properties.py                 # a few hundred cases, seconds
    pytest tests/test_cli_properties.py -m slow         # a few thousand

Hypothesis draws parameters from the real tables (every experiment's ``params()``, every scene's
``scene_params``, every option of ``render``) and values a careless or hostile user could type:
negative, zero, huge, NaN, inf, empty, of the wrong type, unicode, very long. Each command line runs
in-process through click's CliRunner and stops at validation: ``render.py list`` (which checks every
``--set`` and ``--config`` value against every experiment and scene) and ``render.py render --check``
(which checks the render options as well, then writes nothing). The property: exit status 0 with a
valid result, or a non-zero exit with exactly one ``Error: ...`` line on stderr; never a traceback;
nothing new on disk.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scenes
from cli import media as cli_media
from cli.params import scene_params
from render import cli
from simulation.experiments import EXPERIMENTS

SCENE_PARAMS = {scene.__name__: scene_params(scene) for scene in scenes.SCENES_IN_ORDER}
EXPERIMENT_PARAMS = {name: exp.params() for name, exp in EXPERIMENTS.items()}
RENDER_OPTIONS = [p for p in cli.commands["render"].params if isinstance(p, __import__("click").Option)
                  and p.name not in ("check", "config_file", "sets")]

# --set keys: every parameter name, bare (every experiment that has it) and scoped, and scene attributes.
KEYS = sorted({key for params in EXPERIMENT_PARAMS.values() for key in params}
              | {f"{exp}.{key}" for exp, params in EXPERIMENT_PARAMS.items() for key in params}
              | {f"{scene}.{key}" for scene, params in SCENE_PARAMS.items() for key in params})
assert KEYS, "the parameter tables are empty"

HOSTILE_WORDS = ["", " ", "-1", "0", "-0", "1e309", "-1e309", "nan", "NaN", "inf", "-inf", "1e-400", "true", "no",
                 "abc", ",", ",,", "1,,2", "1,x", "[1, 2]", "None", "0x10", "1_000", "٣", "３", "1" * 5000,
                 "9" * 400, "é" * 3000, "\u202e", "\x00", "a\nb", "=", "depth=3", "'", '"', "\\", "${HOME}"]

numbers = st.one_of(st.integers(-10**40, 10**40), st.floats(allow_nan=True, allow_infinity=True))
texts = st.one_of(st.sampled_from(HOSTILE_WORDS), st.text(max_size=40), st.text(min_size=500, max_size=3000))
set_values = st.one_of(texts, numbers.map(str), st.lists(numbers, max_size=5).map(lambda v: ",".join(map(str, v))))
toml_values = st.recursive(st.one_of(numbers, texts, st.booleans()),
                           lambda inner: st.lists(inner, max_size=4), max_leaves=6)


def _settings(examples: int):
    return settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -2**63 <= value < 2**63 else json.dumps(str(value))  # TOML ints are 64-bit
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=True)  # \\uXXXX escapes are TOML too


def _toml(entries: list[tuple[str, object]]) -> str:
    """A lecture TOML file with each (key, value) in the table its key belongs to."""
    tables: dict[str, dict[str, object]] = {}
    for key, value in entries:
        scope, _, name = key.rpartition(".")
        table = "params" if not scope else (f"experiments.{scope}" if scope in EXPERIMENTS else f"scenes.{scope}")
        tables.setdefault(table, {})[name] = value
    return "".join(f"[{table}]\n" + "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in values.items())
                   for table, values in tables.items())


def _files(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p), p.stat().st_size) for p in root.rglob("*") if p.is_file())


def _check(args: list[str], root: Path) -> None:
    """Run ``args`` in-process; assert the property of the module docstring."""
    before = _files(root)
    result = CliRunner().invoke(cli, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args!r}") from result.exception
    lines = result.stderr.splitlines()
    if result.exit_code == 0:
        if "--json" in args:
            json.loads(result.stdout)  # a valid result
        else:
            assert result.stdout.startswith("check: the input is valid"), result.stdout
    else:
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, result.stderr[:2000])
        assert result.stdout == "", result.stdout[:2000]
    assert _files(root) == before, f"{args!r} wrote files"


@pytest.fixture()
def sandbox(tmp_path, isolated_cache, monkeypatch):
    """A working folder and the trace cache, watched for new files together."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cache").symlink_to(isolated_cache, target_is_directory=True)
    return tmp_path


def _set_case(sandbox: Path, pairs: list[tuple[str, str]]) -> None:
    args = ["list", "--json"]
    for key, value in pairs:
        args += ["--set", f"{key}={value}"]
    _check(args, sandbox)


def _toml_case(sandbox: Path, entries: list[tuple[str, object]]) -> None:
    config = sandbox / "inputs" / "lecture.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(_toml(entries), encoding="utf-8")
    _check(["list", "--json", "--config", str(config)], sandbox)


def _render_case(sandbox: Path, scene: str, options: list[tuple[str, str]], pairs: list[tuple[str, str]]) -> None:
    args = ["render", scene, "--check", "--output", str(sandbox / "out")]
    for flag, value in options:
        args += [flag] if value is None else [flag, value]
    for key, value in pairs:
        args += ["--set", f"{key}={value}"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_media, "missing_tools", lambda lang: [])  # a preflight of the machine, not of the input
        _check(args, sandbox)


pairs = st.lists(st.tuples(st.sampled_from(KEYS), set_values), min_size=1, max_size=3)
toml_entries = st.lists(st.tuples(st.sampled_from(KEYS), toml_values), min_size=1, max_size=3)


@st.composite
def render_options(draw):
    out = []
    for option in draw(st.lists(st.sampled_from(RENDER_OPTIONS), max_size=3, unique_by=lambda o: o.name)):
        flag = option.opts[0]
        if option.is_flag:
            out.append((draw(st.sampled_from(option.opts + option.secondary_opts)), None))
        else:
            out.append((flag, draw(set_values)))
    return out


scene_names = st.sampled_from([s.__name__ for s in scenes.SCENES_IN_ORDER])


def _set_test(examples: int):
    @_settings(examples)
    @given(pairs=pairs)
    def test(sandbox, pairs):
        _set_case(sandbox, pairs)
    return test


def _toml_test(examples: int):
    @_settings(examples)
    @given(entries=toml_entries)
    def test(sandbox, entries):
        _toml_case(sandbox, entries)
    return test


def _render_test(examples: int):
    @_settings(examples)
    @given(scene=scene_names, options=render_options(), pairs=st.lists(st.tuples(st.sampled_from(KEYS), set_values),
                                                                        max_size=2))
    def test(sandbox, scene, options, pairs):
        _render_case(sandbox, scene, options, pairs)
    return test


# The default run: 300 cases in all, a few seconds.
test_generated_set_values_never_crash = _set_test(150)
test_generated_config_files_never_crash = _toml_test(100)
test_generated_render_options_never_crash = _render_test(50)
# The slow set: 3,000 more.
test_many_generated_set_values_never_crash = pytest.mark.slow(_set_test(1500))
test_many_generated_config_files_never_crash = pytest.mark.slow(_toml_test(1000))
test_many_generated_render_options_never_crash = pytest.mark.slow(_render_test(500))


def test_the_property_check_can_fail(sandbox, monkeypatch):
    """A command that crashes, or that writes a file, is caught by ``_check``."""
    import cli.plan as plan

    real = plan.all_params

    def crash():
        raise RuntimeError("boom")

    monkeypatch.setattr(plan, "all_params", crash)
    with pytest.raises(AssertionError, match="traceback"):
        _check(["list", "--json"], sandbox)

    def writes():
        (sandbox / "stray").write_text("x")
        return real()

    monkeypatch.setattr(plan, "all_params", writes)
    with pytest.raises(AssertionError, match="wrote files"):
        _check(["list", "--json"], sandbox)


# -- scene knobs with limits --------------------------------------------------------------------

LIMITED = [(scene, key, limit) for scene in scenes.SCENES_IN_ORDER
           for key, limit in getattr(scene, "param_limits", {}).items()]


def test_every_limit_names_a_knob_of_its_scene_and_admits_the_default():
    assert LIMITED, "no scene declares param_limits"
    for scene, key, limit in LIMITED:
        default, _ = scene_params(scene)[key]
        assert default in limit if isinstance(default, str) else limit[0] <= default <= limit[1], (scene, key)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(LIMITED), data=st.data())
def test_scene_knobs_outside_their_limits_are_refused_and_inside_accepted(case, data):
    """A generated value for a limited knob is refused (ConfigError naming the knob) exactly when it lies outside
    the declared limit; numbers come as the strings --set passes, including huge ones."""
    from cli.params import Layer, scene_overrides
    from simulation.config import ConfigError

    scene, key, limit = case
    if isinstance(limit[0], str):
        value = data.draw(st.one_of(st.sampled_from(limit), st.text(min_size=1, max_size=12)))
        inside = value in limit
    else:
        value = data.draw(st.integers(min_value=-10**30, max_value=10**30) | st.integers(limit[0] - 3, limit[1] + 3))
        inside = limit[0] <= value <= limit[1]
    layer = Layer("--set", scenes={scene.__name__: {key: str(value)}})
    if inside:
        assert scene_overrides([layer], scene)[key] == value
    else:
        with pytest.raises(ConfigError, match=f"{scene.__name__}.{key} must be"):
            scene_overrides([layer], scene)
