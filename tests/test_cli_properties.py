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
valid result, or a non-zero exit with exactly one ``Error: ...`` line on stderr (values of any length
shortened in it); never a traceback; nothing new on disk, the trace cache included.

Every option and argument of every command, found by walking click's command tree (a new option without a
strategy fails a test): paths of every kind (missing, a folder for a file and the reverse, a FIFO, /dev/null,
/dev/zero, a loop of links, a dangling link, /proc/self/mem which no read gets through even as root, a path
under a file, a name too long, odd characters, NUL), numbers out of range, choices, Dask scheduler addresses,
``--model`` specs (malformed, missing, not a regular file, a module that raises or exits, a factory that is
no model) and render jobs. Commands without ``--check`` stop where their work would start (training,
rendering: :class:`ReachedWork`), which counts as valid input; nothing may be written before it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scenes
from cli import doctor
from cli.params import scene_params
from render import cli
from simulation.experiments import EXPERIMENTS

from support import ROOT, examples

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


def _settings(count: int):
    return settings(max_examples=examples(count), deadline=None, database=None, derandomize=False,
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
    """Every file under ``root`` and under the trace cache (rglob does not follow the sandbox's link to it)."""
    roots = [root, Path(os.environ["RESIDUAL_CACHE"])] if os.environ.get("RESIDUAL_CACHE") else [root]
    return sorted((str(p), p.stat().st_size) for r in roots for p in r.rglob("*") if p.is_file())


class ReachedWork(BaseException):
    """Raised where a command would start its work (training, rendering): the input passed every check. Not an
    Exception, so that no ``except Exception`` on the way swallows it."""


def _check(args: list[str], root: Path) -> None:
    """Run ``args`` in-process; assert the property of the module docstring. A command that reaches its work
    (:class:`ReachedWork`, from a patched trainer or renderer) took the input as valid, and must not have
    written anything before."""
    before = _files(root)
    try:
        result = CliRunner().invoke(cli, args)
    except ReachedWork:  # CliRunner catches Exception only
        assert _files(root) == before, f"{args!r} wrote files before its work started"
        return
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args!r}") from result.exception
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.output, result.output[-2000:]
    command = next((a for a in args if not a.startswith("-")), "")
    if result.exit_code == 0 and command in ("train", "explore", "_worker"):  # valid input reaches the work
        raise AssertionError(f"{args!r} ended with status 0 before its work: {result.output[-2000:]}")
    if command == "doctor":  # a report of this machine: 1 when a required piece is missing, never an input error
        assert result.exit_code in (0, 1) and result.stderr == "", result.output[-2000:]
    elif result.exit_code == 0:
        if "--json" in args:
            json.loads(result.stdout)  # a valid result
        elif "--check" in args:
            assert result.stdout.startswith("check: the input is valid"), result.stdout
    else:
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, result.stderr[:2000])
        assert len(lines[0]) <= 2000, lines[0][:200]  # one clear line: a hostile value is not echoed whole
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
        patch.setattr(doctor, "preflight", lambda names: None)  # a check of the machine, not of the input
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


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


# -- every option of every command ----------------------------------------------------------------
#
# click's command tree is walked, so a new option or argument is covered as soon as it exists: each one gets values
# from the strategy of its type (a path, a choice, a number, a flag) or, for free text, of its name; an option that
# has neither fails test_every_option_of_every_command_has_a_strategy. Each generated command line starts from a
# valid, cheap one that writes nothing (render ... --check; train and explore stop where training would start).

def walk(group: click.Group = cli, path: tuple[str, ...] = ()):
    """(command path, command) of the group and of every command under it, the group first."""
    yield path, group
    for name, command in getattr(group, "commands", {}).items():
        yield from walk(command, (*path, name))


def _hostile_files(root: Path) -> dict[str, str]:
    """Paths of every kind a careless or hostile user could pass, made under ``root``: {kind: path}."""
    h = root / "hostile"
    h.mkdir()
    (h / "file.txt").write_text("not what was asked for\n")
    (h / "folder").mkdir()
    (h / "folder.py").mkdir()
    (h / "folder.toml").mkdir()
    for name in ("fifo", "fifo.py", "fifo.toml", "fifo.npz"):
        os.mkfifo(h / name)
    for name in ("loop", "loop.py", "loop.toml"):
        (h / name).symlink_to(h / name)
    (h / "dangling.toml").symlink_to(h / "nowhere.toml")
    (h / "dangling.py").symlink_to(h / "nowhere.py")
    (h / "raises.py").write_text("raise RuntimeError('a model file that fails on import')\n")
    (h / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (h / "syntax.py").write_text("def build(:\n")
    (h / "not_a_model.py").write_text("def build(**kwargs):\n    return 3\n\nbuild_value = 3\n")
    (h / "bad.toml").write_text("[render\nquality = \n")
    (h / "bad.npz").write_bytes(b"PK\x03\x04 not a zip archive")
    (h / "binary.toml").write_bytes(bytes(range(256)))
    return {
        "missing": str(h / "missing" / "x.toml"), "folder": str(h / "folder"), "folder.toml": str(h / "folder.toml"),
        "file": str(h / "file.txt"), "fifo": str(h / "fifo"), "fifo.toml": str(h / "fifo.toml"),
        "fifo.npz": str(h / "fifo.npz"), "dev-null": "/dev/null", "dev-zero": "/dev/zero",
        "loop": str(h / "loop"), "loop.toml": str(h / "loop.toml"), "dangling": str(h / "dangling.toml"),
        # Tests run as root: a chmod 000 file is still readable. /proc/self/mem opens, and every read of it fails.
        "unreadable": "/proc/self/mem", "under-a-file": str(h / "file.txt" / "child.toml"),
        "long-name": str(h / ("n" * 300)), "long-path": str(h / "/".join(["d" * 200] * 25)),
        "odd": str(h / "odd\nname \u202e ü*?"), "dash": "-", "empty": "", "proc": "/proc", "nul": str(h / "a\x00b"),
        "bad.toml": str(h / "bad.toml"), "binary.toml": str(h / "binary.toml"), "bad.npz": str(h / "bad.npz"),
    }


def _hostile_models(files: dict[str, str]) -> list[str]:
    """--model specs: malformed, missing, not regular files, modules that fail, factories that are no model.
    Only named, harmless callables: a generated module:function could be os:abort."""
    h = Path(files["file"]).parent
    return ["", ":", "x.py:", ":build", "x.py:1build", "x.py:build:", "1mod:f", "mod..sub:f", "a" * 5000 + ":f",
            "no_such_module_xyz:build", "os:no_such_factory", "os:sep", "sys:exit", "builtins:exit",
            "torchvision.models:no_such_net", "é.py:f", "x.py:f\x00", "/dev/null:build", "/dev/zero:build",
            *(f"{h / name}:build" for name in ("missing.py", "folder.py", "fifo.py", "loop.py", "dangling.py",
                                               "raises.py", "exits.py", "syntax.py", "not_a_model.py")),
            f"{h / 'not_a_model.py'}:build_value", f"{h / 'file.txt'}/x.py:build"]


ADDRESSES = ["", "local", "tcp://", "tcp://:8786", "tcp://host:", "tcp://host:0", "tcp://host:99999", "tcp://host:-1",
             "tcp://host:abc", "tcp://[::1", "host:8786", "8786", "http://host:8786", "tcp://host:8786/path",
             "tcp://user@host:8786", "tcp://ho st:8786", "tcp://host\n:8786", "tcp://host:8786?x=1", "://host:1",
             "tcp://" + "h" * 5000 + ":1", "\x00", "tcp://host:8786\x00"]
JOBS = ["", "{", "[]", "null", "3", '"job"', '{"scene": 1}', '{"a": ' * 3000 + "1" + "}" * 3000,
        '{"scene": "TinyTrace", "module": "cli_scenes"}']
NAMES = st.one_of(st.sampled_from(HOSTILE_WORDS), st.text(max_size=30),
                  st.sampled_from(["NoSuchScene", "os:path", "cli_scenes:NoSuch", "no_such_module:Scene", "vanishing",
                                   "IdentityHighway", "model", "beyond", "en-piper", "zh-espeak", "auto", "-x",
                                   "sys:exit", "scenes:ALL_SCENES"]))


def _valid_job(sandbox: Path) -> dict:
    """A render job as render.py hands one to a worker (cli.media.RenderJob.to_json), for cli_scenes:TinySquare."""
    return {"scene": "TinySquare", "module": "cli_scenes", "params": {}, "attrs": {}, "traces": {}, "source": "x",
            "quality": "l", "lang": "en", "format": "mp4", "transparent": False, "output": str(sandbox / "out")}


def _jobs(sandbox: Path):
    """Hostile render jobs: malformed JSON, and a valid job with one field made hostile."""
    fields = st.sampled_from(sorted(_valid_job(sandbox)) + ["unknown", "voice", "theme"])
    hostile = st.one_of(numbers, texts, st.booleans(), st.none(), st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
    mutated = st.tuples(fields, hostile).map(lambda fv: json.dumps({**_valid_job(sandbox), fv[0]: fv[1]}))
    return st.one_of(st.sampled_from(JOBS), mutated, texts)


def _paths(param: click.Parameter, files: dict[str, str]):
    values = st.sampled_from(sorted(files.values()))
    return values if param.name != "config_file" else st.one_of(values, texts)


def strategy(param: click.Parameter, sandbox: Path, files: dict[str, str]):
    """argv tokens for ``param`` (a strategy), or None when it has none: by the param's type (path, choice, number,
    flag) and, for free text, by its name."""
    if isinstance(param, click.Option) and not param.is_flag and isinstance(getattr(param, "flag_value", None), str):
        return st.one_of(st.just([param.opts[0]]), NAMES.map(lambda v: [f"{param.opts[0]}={v}"]))  # --voice [NAME]
    if isinstance(param, click.Option) and param.is_flag:
        return st.sampled_from([[o] for o in param.opts + param.secondary_opts])
    if isinstance(param.type, click.Path):
        values = _paths(param, files)
    elif isinstance(param.type, click.Choice):
        values = st.one_of(st.sampled_from(list(param.type.choices)), texts)
    elif isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
        values = st.one_of(numbers.map(str), texts, st.sampled_from(["0", "-1", "1", "2", "1000000", "1e3", "0x2"]))
    elif param.name == "sets":
        values = st.tuples(st.sampled_from(KEYS), set_values).map(lambda kv: f"{kv[0]}={kv[1]}")
    elif param.name == "model":
        values = st.sampled_from(_hostile_models(files))
    elif param.name == "scheduler":
        values = st.one_of(st.sampled_from(ADDRESSES), texts)
    elif param.name == "job_json":
        values = _jobs(sandbox)
    elif param.name in ("scene_names", "experiment", "experiments", "chapters", "voice"):
        values = NAMES
    elif param.name in ("name", "lang"):  # render.py i18n add NAME / init LANG: a catalog key, a language code
        values = st.one_of(NAMES, st.sampled_from(["IdentityHighway.title", "Owner.", ".key", "es", "pt_BR", "zh",
                                                   "xx-YY", "../x", "en/../../y", "a" * 300]))
    elif param.name in ("english_text", "comment"):
        values = texts
    elif param.name == "translations":  # --lang LANG TEXT
        return st.tuples(st.one_of(NAMES, st.sampled_from(["zh", "es", "de"])), texts).map(
            lambda lt: [param.opts[0], *lt])
    elif param.name == "texts":  # --text Scene.key=TEXT
        values = st.one_of(st.sampled_from(["ChainRuleProduct.title=Mine", "ChainRuleProduct.title={x}",
                                            "ChainRuleProduct.titel=x", "ChainRuleProduct=x", "=x", "a.b.c=x",
                                            "IdentityHighway.title=x"]),
                           texts.map(lambda t: f"ChainRuleProduct.title={t}"), texts)
    else:
        return None
    if isinstance(param, click.Argument):
        return values.map(lambda v: [v])
    return values.map(lambda v: [param.opts[0], v])


def _base(command: str, sandbox: Path) -> tuple[list[str], list[str]]:
    """A valid, cheap command line of ``command`` that writes nothing: (positional arguments, options)."""
    return {"list": ([], []), "train": (["chain_rule"], []), "inspect": ([str(sandbox / "trace.npz")], []),
            "render": (["ChainRuleProduct"], ["--check"]), "all": ([], ["--check"]),  # a scene that --model can draw
            "slides": (["ChainRuleProduct"], ["--check"]), "page": (["ChainRuleProduct"], ["--check"]),
            "explore": (["chain_rule"], ["-o", str(sandbox / "explore")]), "doctor": ([], []),
            "_worker": ([json.dumps(_valid_job(sandbox))], []), "i18n": (["stats"], [])}[command]


COMMANDS = [path[0] for path, _ in walk() if path]


def test_every_option_of_every_command_has_a_strategy(tmp_path):
    files = _hostile_files(tmp_path)
    missing = [f"{' '.join(path) or 'render.py'} {p.name}" for path, command in walk() for p in command.params
               if strategy(p, tmp_path, files) is None]
    assert not missing, f"no strategy of bad input for: {missing} (tests/test_cli_properties.py: strategy)"
    assert set(COMMANDS) == set(cli.commands) and len(COMMANDS) >= 10


def test_an_option_without_a_strategy_is_found(tmp_path):
    """The twin: a new free-text option is reported until it has a strategy."""
    files = _hostile_files(tmp_path)
    new = click.Option(["--frobnicate"], default=None)
    assert strategy(new, tmp_path, files) is None
    assert strategy(click.Option(["--level"], type=click.IntRange(0, 3)), tmp_path, files) is not None


@pytest.fixture()
def hostile(sandbox, monkeypatch):
    """The sandbox with hostile files, a valid trace to inspect, and the work itself (training, rendering) replaced
    by :class:`ReachedWork`; the machine's preflight (cli/doctor.py) passes."""
    from simulation.trace import Trace

    import torch  # noqa: F401  a --model is then built and probed in this process, not in a subprocess per case

    files = _hostile_files(sandbox)
    Trace({"config": {"depth": 2}, "digest": "0" * 16},
          {"step": np.arange(3), "loss": np.ones(3, np.float32), "error": np.zeros(3, np.float32),
           "test_error": np.zeros(3, np.float32), "grad_norm": np.full((3, 2), 0.5),
           "nonfinite": np.zeros((3, 2), np.int64)}).save(sandbox / "trace.npz")

    def work(*args, **kwargs):
        raise ReachedWork()

    monkeypatch.setattr("simulation.cache.get_traces", work)
    monkeypatch.setattr("scenes.kit.base.get_traces", work)  # a scene built without a render (i18n check) trains too
    monkeypatch.setattr("cli.media.render_job", work)
    monkeypatch.setattr(doctor, "preflight", lambda names: None)
    return sandbox, files


def _option_test(command: str, examples: int):
    @_settings(examples)
    @given(data=st.data())
    def test(hostile, data, catalogs):
        sandbox, files = hostile
        target, prefix = cli.commands[command], [command]
        if isinstance(target, click.Group):  # render.py i18n: one of its commands that takes input
            name = data.draw(st.sampled_from(sorted(n for n, c in target.commands.items() if c.params)))
            target, prefix = target.commands[name], [command, name]
        own = target.params
        chosen = data.draw(st.lists(st.sampled_from(own), min_size=1, max_size=3, unique_by=lambda p: p.name))
        positional, options = _base(command, sandbox) if len(prefix) == 1 else ([], [])
        if len(prefix) > 1:  # the valid arguments of the i18n command, each replaced below where chosen
            positional = {"add": ["Hostile.key", "A text"], "init": ["es"], "check": ["ChainRuleProduct"]}[prefix[1]]
        if command == "train" and any(p.name == "model" for p in chosen):
            positional = []  # train --model FILE.py:FACTORY trains the model alone
        hostile_arguments = [p for p in chosen if isinstance(p, click.Argument)]
        if hostile_arguments and len(prefix) > 1:  # each chosen argument in its own place
            arguments = [p for p in own if isinstance(p, click.Argument)]
            positional = [data.draw(strategy(p, sandbox, files))[0] if p in hostile_arguments else positional[i]
                          for i, p in enumerate(arguments)]
        elif hostile_arguments:
            positional = [t for p in hostile_arguments for t in data.draw(strategy(p, sandbox, files))]
        options = options + [t for p in chosen if isinstance(p, click.Option)
                             for t in data.draw(strategy(p, sandbox, files))]
        group = [t for p in cli.params for t in data.draw(st.one_of(st.just([]), strategy(p, sandbox, files)))]
        _check([*group, *prefix, *positional, *options], sandbox)
    return test


@pytest.fixture()
def catalogs(tmp_path_factory, monkeypatch):
    """render.py i18n writes the catalogs (add, init): a copy of locale/ outside the sandbox stands in for the
    checkout's, which the tests never touch."""
    from narration import i18n

    folder = tmp_path_factory.mktemp("locale") / "locale"
    shutil.copytree(i18n.LOCALE_DIR, folder)
    monkeypatch.setattr(i18n, "LOCALE_DIR", folder)
    monkeypatch.setattr(i18n, "TEMPLATE", folder / i18n.TEMPLATE.name)
    monkeypatch.setattr("cli.i18n.TEMPLATE", folder / i18n.TEMPLATE.name)
    monkeypatch.setattr("cli.i18n.ROOT", folder.parent)  # the paths it prints, relative to the checkout
    # the catalogs read while the copy stands in are cached under the default root (root=None): forgotten on both
    # sides, or a hostile string the copy got (a lone "}") reached a later test of the same worker
    # (test_house's placeholder check failed in one default run in four)
    i18n.clear_caches()
    yield folder
    i18n.clear_caches()


# Every command: a few dozen generated command lines each (all: the whole lecture planned per case, so fewer);
# five times as many in the slow set.
OPTION_EXAMPLES = {"all": 3, "doctor": 2, "list": 10, "slides": 10, "page": 10}
for _command in COMMANDS:
    globals()[f"test_every_option_of_{_command.strip('_')}_never_crashes"] = _option_test(
        _command, OPTION_EXAMPLES.get(_command, 20))
    globals()[f"test_many_options_of_{_command.strip('_')}_never_crash"] = pytest.mark.slow(
        _option_test(_command, 5 * OPTION_EXAMPLES.get(_command, 20)))


def _listed(param: click.Parameter, sandbox: Path, files: dict[str, str]) -> tuple[str, list[str]] | None:
    """(kind, every listed bad value) for a param whose bad values are a list rather than free text: paths, model
    specs, scheduler addresses, render jobs. None for the others (choices, numbers, flags, names: generated)."""
    if isinstance(param.type, click.Path):
        return ("folder" if not param.type.file_okay else "file"), sorted(files.values())
    listed = {"model": _hostile_models(files), "scheduler": ADDRESSES, "job_json": JOBS}
    return (param.name, listed[param.name]) if param.name in listed else None


def _sweep(sandbox: Path, files: dict[str, str], every_command: bool) -> int:
    """Each listed bad value of each param, alone on the param's command's valid command line; a kind of param once
    (on the first command that has it) unless ``every_command``. -> the number of command lines run."""
    seen, runs = set(), 0
    # all: render's options (the same decorator) with the whole lecture planned per case (~3 s each); the generated
    # option tests cover it.
    for command in [c for c in COMMANDS if c != "all" or not every_command]:
        for param in cli.commands[command].params:
            listed = _listed(param, sandbox, files)
            if listed is None or (not every_command and listed[0] in seen):
                continue
            seen.add(listed[0])
            positional, options = _base(command, sandbox)
            if command == "train" and param.name == "model":
                positional = []
            for value in listed[1]:
                if isinstance(param, click.Argument):
                    _check([command, value, *options], sandbox)
                else:
                    _check([command, *positional, *options, param.opts[0], value], sandbox)
                runs += 1
    return runs


def test_every_listed_bad_path_address_model_and_job(hostile):
    """Each path of every kind, each model spec, address and render job, once per kind of param."""
    sandbox, files = hostile
    assert _sweep(sandbox, files, every_command=False) > 100


@pytest.mark.slow
def test_every_listed_bad_value_on_every_command(hostile):
    sandbox, files = hostile
    _sweep(sandbox, files, every_command=True)


@pytest.mark.slow  # a real (tiny) render per output folder that --check accepts
def test_an_output_folder_that_check_accepts_is_one_a_render_can_write(tmp_path, isolated_cache, monkeypatch):
    """--check says "valid" only for a folder the render then writes into: each hostile output path is refused by
    --check in one line, or rendered into (a dangling link passed --check and failed with a traceback after)."""
    monkeypatch.chdir(tmp_path)
    files = _hostile_files(tmp_path)
    for path in sorted(set(files.values())):
        args = ["render", "cli_scenes:TinySquare", "-o", path]
        checked = CliRunner().invoke(cli, [*args, "--check"])
        if checked.exit_code:
            continue
        result = CliRunner().invoke(cli, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (path, result.exception)
        assert result.exit_code == 0, (path, result.output[-2000:])
        assert (Path(path or ".") / "480p15" / "en" / "TinySquare.mp4").is_file(), path


def test_reaching_the_work_after_writing_is_caught(hostile, monkeypatch):
    """The twin of the option tests: a command that writes a file and then starts its work, or that crashes on an
    option, fails the property."""
    sandbox, _ = hostile

    def writes_then_works(*args, **kwargs):
        (sandbox / "half-written.npz").write_bytes(b"x")
        raise ReachedWork()

    monkeypatch.setattr("simulation.cache.get_traces", writes_then_works)
    with pytest.raises(AssertionError, match="wrote files before its work started"):
        _check(["train", "chain_rule"], sandbox)
    monkeypatch.setattr("cli.params.read_config", lambda path: 1 / 0)
    with pytest.raises(AssertionError, match="traceback"):
        _check(["list", "--config", str(sandbox / "trace.npz")], sandbox)
