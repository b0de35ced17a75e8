"""Lecture parameters, the one place they are layered, merged, checked and explained (torch- and manim-free).

Example::

    python render.py all --config lecture.toml --set depth=30 --set vanishing.depths=8,20
    python render.py list --config lecture.toml --set depth=30 --explain     # where each value comes from

Precedence: defaults < the TOML file < ``--model`` / ``--trace`` < ``--set`` (:func:`parameter_layers` builds a
command's layers; :func:`experiment_overrides` and :func:`scene_overrides` merge them, :func:`experiment_sources`
and :func:`scene_sources` say which layer gave each value; :func:`experiment_values` parses an experiment's raw
values, the command line's strings and a file's, into typed ones with :func:`convert_value`, and :func:`build_runs`,
:func:`experiment_runs` and :func:`validate_scoped` hand only those to :func:`simulation.experiments.build_runs`,
which checks their ranges: simulation/ never sees a raw string). A key is ``name`` (every experiment being run that has
that parameter), ``experiment.name`` (one experiment) or ``Scene.name`` (a class attribute of one scene).
A TOML file has up to six tables::

    [render]                    # command-line options: quality, lang, theme, format, transparent, output, jobs, concat, voice
    quality = "m"
    [params]                    # like --set name=value
    steps = 200
    [experiments.vanishing]     # like --set vanishing.name=value
    depths = [8, 20]
    [scenes.IdentityHighway]    # like --set IdentityHighway.name=value
    [model]                     # your own network: like --model SPEC (spec = "...") and --set model.name=value
    spec = "examples/my_resnet.py:build"
    [text.IdentityHighway]      # your own words, in the language rendered: like --text IdentityHighway.title=...
    title = "The skip connection"

Every error is a :class:`simulation.config.ConfigError` with a one-line message. Imports neither torch
nor manim.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from simulation.atomic_io import input_file
from simulation.config import ConfigError, a_type, shown

__all__ = [
    "Layer", "parse_sets", "parse_texts", "merged_texts", "load_config", "model_layer", "read_config", "config_layer", "RENDER_DEFAULTS", "QUALITIES",
    "FORMATS", "LANGS", "THEMES", "DECK_FORMATS",
    "check_render_options", "experiment_overrides", "check_common_keys", "scene_params", "scene_overrides",
    "convert_value", "parameter_layers", "all_params", "validate_scoped", "refuse_unused_sets", "experiment_runs",
    "experiment_sources", "scene_sources", "DEFAULT_SOURCE", "job_sources", "type_name", "SIMPLE_TYPES",
    "TRUE_WORDS", "FALSE_WORDS", "experiment_values", "build_runs",
    "scene_runs", "ParameterInputs", "as_layers", "SceneParameters", "resolve_scenes",
]

# -- the one value parser: --set strings, TOML values and typed values, typed by a default --------------------------

SIMPLE_TYPES = (bool, int, float, str)
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
_SHOWN = 60  # characters of a bad value quoted in a message: a 10,000-character value stays one short line


def _error(message: str) -> Exception:
    return ConfigError(message)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 5] + "...'" + f" ({len(text)} characters)"


def type_name(default: Any) -> str | None:
    """``"int"``, ``"tuple[float]"`` ... for a default of a supported type; None for any other default."""
    if type(default) in SIMPLE_TYPES:
        return type(default).__name__
    if isinstance(default, tuple) and default and all(type(v) is type(default[0]) for v in default) \
            and type(default[0]) in SIMPLE_TYPES:
        return f"tuple[{type(default[0]).__name__}]"
    return None


def convert_value(label: str, default: Any, value: Any, finite: bool = False) -> Any:
    """``value`` as the type of ``default``.

    ``value``: a command-line string (``"3"``, ``"0.5"``, ``"yes"``, ``"8,20"``) or a TOML / Python value
    (``3``, ``[8, 20]``; an int where a float is expected is widened). A tuple default takes a
    comma-separated string or a list, at least one item. ``finite=True`` also refuses NaN and inf floats
    (for parameters without a range check of their own, such as scene attributes). Raises ConfigError
    naming ``label``; never another exception.
    """
    if isinstance(default, tuple):
        if not default:
            raise _error(f"{label} has an empty default; it cannot be set")
        if isinstance(value, (list, tuple)):
            items = list(value)
        elif isinstance(value, str):
            parts = value.split(",")
            items = [v for v in parts if v.strip()]
            if items and len(items) < len(parts):  # "8,,20" or "8,20,": a value left out?
                raise _error(f"{label} has an empty item in {_show(value)}")
        else:
            items = [value]
        kind = type(default[0])
        if not items:
            raise _error(f"{label} must hold at least one value; got {_show(value)}")
        try:
            return tuple(convert_value(label, default[0], item, finite) for item in items)
        except Exception:
            raise _error(f"{label} must be list[{kind.__name__}] (comma-separated), got {_show(value)}") from None
    kind = type(default)
    if kind not in SIMPLE_TYPES:
        raise _error(f"{label} cannot be set (its default is {a_type(default)})")
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        try:
            if kind is bool:
                if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                    raise ValueError
                value = text.lower() in TRUE_WORDS
            elif not text.isascii() or "_" in text:  # int() also reads "１２", "٣" and "1_0"
                raise ValueError
            else:
                value = kind(text)  # int("4300 digits and more") raises ValueError too
        except (ValueError, OverflowError):
            if kind in (int, float) and "," in text:  # a list where one number belongs
                raise _error(f"{label} must be one {kind.__name__}; got {_show(text)}") from None
            raise _error(f"{label} must be {kind.__name__}, got {_show(text)}") from None
    elif isinstance(value, str):
        value = value.strip()
    if kind is float and type(value) is int:
        try:
            value = float(value)
        except OverflowError:
            raise _error(f"{label} must be a float, got an integer too large for one") from None
    if type(value) is not kind:
        raise _error(f"{label} must be {kind.__name__}, got {_show(value)}")
    if finite and kind is float and not math.isfinite(value):
        raise _error(f"{label} must be a finite number; got {value}")
    return value


QUALITIES = {"l": "low_quality", "m": "medium_quality", "h": "high_quality", "k": "fourk_quality"}
FORMATS = ("mp4", "webm", "gif", "png")
DECK_FORMATS = ("html", "pptx", "pdf")  # render.py slides --format
# en, zh, each language with a catalog under locale/ (narration.i18n), and the pseudo-locale en-XA: the same as
# narration.text.LANGS (a test checks), found here again so that --help loads nothing of narration/
_CATALOGS = sorted(p.parent.parent.name for p in (Path(__file__).resolve().parent.parent / "locale").glob(
    "*/LC_MESSAGES/lecture.po"))
LANGS = ("en", "zh", *[lang for lang in _CATALOGS if lang not in ("en", "zh")], "en-XA")
THEMES = ("dark", "light")  # the same as scenes.kit.theme.THEME_NAMES (a test checks); dark is the default
MAX_JOBS = 64
RENDER_DEFAULTS: dict[str, Any] = {
    "quality": "l", "lang": "en", "format": "mp4", "transparent": False, "output": "media", "jobs": None,
    "concat": False, "theme": "dark", "voice": None,
}
# LectureScene attributes that are plumbing, not knobs: the CLI sets them itself or they are not for users.
MODEL_EXPERIMENT = "model"  # the experiment of a user's own network (simulation.experiments)
RESERVED_SCENE_ATTRS = frozenset({"experiment", "params", "experiment_defaults", "lang", "theme", "strings", "check_layout", "trace_files",
                                  "text_overrides", "fit_words",
                                  "voice", "param_limits", "chapter"})


@dataclass
class Layer:
    """Parameter values from one source (a TOML file or the command line); later layers win."""

    origin: str  # where the values came from, for error messages: "--set" or a file name
    common: dict[str, Any] = field(default_factory=dict)  # name -> value, for every experiment with that name
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)  # experiment -> {name: value}
    scenes: dict[str, dict[str, Any]] = field(default_factory=dict)  # scene class name -> {attribute: value}
    render: dict[str, Any] = field(default_factory=dict)  # render options (files only; see RENDER_DEFAULTS)
    texts: dict[str, str] = field(default_factory=dict)  # "Owner.key" -> the words shown instead ([text.Owner], --text)


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def parse_sets(pairs: Iterable[str], experiments: Iterable[str], scenes: Iterable[str]) -> Layer:
    """``("depth=3", "vanishing.depths=8,20", "Summary.pause=2")`` -> a :class:`Layer` of strings.

    Raises ConfigError for a pair without ``=`` or a scope that is neither an experiment nor a scene.
    """
    experiments, scenes = list(experiments), list(scenes)
    layer = Layer("--set")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        if not _KEY.fullmatch(key):
            raise ConfigError(f"--set {key[:60]!r}: a key is NAME or SCOPE.NAME (SCOPE an experiment or a "
                              "scene; letters, digits and _), as `render.py list` shows them")
        scope, dot, name = key.rpartition(".")
        if not dot:
            layer.common[key] = value.strip()
        elif scope in experiments and name:
            layer.experiments.setdefault(scope, {})[name] = value.strip()
        elif scope in scenes and name:
            layer.scenes.setdefault(scope, {})[name] = value.strip()
        else:
            raise ConfigError(f"--set {key}: {scope!r} is neither an experiment ({', '.join(experiments)}) "
                              f"nor a scene ({', '.join(scenes)})")
    return layer


def read_config(path: str | Path) -> dict[str, Any]:
    """Read a lecture TOML file and check its shape: only the four tables of the module docstring, a
    known key and a valid value for every render option. -> the parsed tables.

    Raises ConfigError for a missing or unreadable file, bad TOML, an unknown table or render option.
    """
    path = input_file(path, "config file", ConfigError)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    tables = ("render", "params", "experiments", "scenes", "model", "text")
    for key, value in data.items():
        if key not in tables:
            raise ConfigError(f"{path}: unknown entry {key!r}; use the tables [{'], ['.join(tables)}]")
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {key!r} must be a table ([{key}])")
    for key in data.get("render", {}):
        if key not in RENDER_DEFAULTS:
            raise ConfigError(f"{path}: unknown render option {key!r}; known: {', '.join(RENDER_DEFAULTS)}")
    check_render_options(data.get("render", {}), origin=str(path))
    for owner, words in data.get("text", {}).items():
        if not isinstance(words, dict) or not all(isinstance(v, str) for v in words.values()):
            raise ConfigError(f"{path}: [text.{owner}] must be a table of key = \"text\"")
    return data


def parse_texts(pairs: Iterable[str]) -> Layer:
    """``("IdentityHighway.title=The skip connection",)`` -> a :class:`Layer` of texts; ConfigError for a pair
    that is not ``Owner.key=TEXT``. Whether the string exists is checked with the scenes (:func:`narration.i18n.check_overrides`)."""
    layer = Layer("--text")
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            raise ConfigError(f"--text expects Scene.key=TEXT (IdentityHighway.title=...), got {pair[:60]!r}")
        layer.texts[name.strip()] = value
    return layer


def merged_texts(layers: Iterable[Layer]) -> dict[str, str]:
    """``{"Owner.key": text}`` of every layer, later ones winning."""
    out: dict[str, str] = {}
    for layer in layers:
        out.update(layer.texts)
    return out


def config_layer(data: Mapping[str, Any], path: str | Path, experiments: Iterable[str],
                 scenes: Iterable[str] | None) -> Layer:
    """The parameter tables of a file read by :func:`read_config` as a :class:`Layer`.

    ``scenes=None`` accepts any scene table unchecked (commands that draw nothing, such as ``train``).
    Raises ConfigError for an unknown experiment or scene, or a scoped entry that is not a table.
    """
    experiments = list(experiments)
    layer = Layer(str(path), common=dict(data.get("params", {})), render=dict(data.get("render", {})),
                  texts={f"{owner}.{key}": text for owner, words in data.get("text", {}).items()
                         for key, text in words.items()})
    if data.get("model"):  # [model] is [experiments.model]; a key in both is taken from [experiments.model]
        layer.experiments[MODEL_EXPERIMENT] = dict(data["model"])
    scenes = None if scenes is None else list(scenes)
    for kind, known, target in (("experiments", experiments, layer.experiments), ("scenes", scenes, layer.scenes)):
        for name, values in data.get(kind, {}).items():
            if known is not None and name not in known:
                raise ConfigError(f"{path}: unknown {kind[:-1]} {name!r} in [{kind}.{name}]; "
                                  f"known: {', '.join(known)}")
            if not isinstance(values, dict):
                raise ConfigError(f"{path}: [{kind}.{name}] must be a table")
            target[name] = {**target.get(name, {}), **values}
    return layer


def model_layer(spec: str) -> Layer:
    """``--model SPEC`` as a layer: the spec of experiment ``model``."""
    return Layer("--model", experiments={MODEL_EXPERIMENT: {"spec": spec}})


def trace_layer(trace: str | None, twin: str | None) -> Layer:
    """``--trace FILE`` / ``--twin FILE`` as a layer: the parameters ``trace`` and ``twin`` of experiment ``model``
    (paths made absolute: a render job runs in another process)."""
    import os

    values = {key: os.path.abspath(os.path.expanduser(path)) for key, path in (("trace", trace), ("twin", twin)) if path}
    return Layer("--trace", experiments={MODEL_EXPERIMENT: values})


def load_config(path: str | Path, experiments: Iterable[str], scenes: Iterable[str] | None) -> Layer:
    """:func:`read_config` then :func:`config_layer`: a lecture TOML file as a :class:`Layer`."""
    return config_layer(read_config(path), path, experiments, scenes)


def check_render_options(options: Mapping[str, Any], origin: str = "command line") -> None:
    """Validate render options (a subset of RENDER_DEFAULTS' keys) and their combinations."""
    choices = {"quality": tuple(QUALITIES), "lang": LANGS, "theme": THEMES, "format": FORMATS}
    for key, allowed in choices.items():
        if key in options and options[key] not in allowed:
            raise ConfigError(f"{origin}: {key} must be one of {', '.join(allowed)}; got {options[key]!r}")
    for key in ("transparent", "concat"):
        if key in options and not isinstance(options[key], bool):
            raise ConfigError(f"{origin}: {key} must be true or false; got {options[key]!r}")
    if "output" in options and (not isinstance(options["output"], str) or not options["output"].strip()):
        raise ConfigError(f"{origin}: output must be a folder name; got {options['output']!r}")
    voice = options.get("voice")
    if voice is not None and (not isinstance(voice, str) or not voice.strip()):
        raise ConfigError(f"{origin}: voice must be a voice name (render.py list) or \"auto\"; got {voice!r}")
    jobs = options.get("jobs")  # None: the default of cli/jobs.py (the cores, memory permitting)
    if jobs is not None and (type(jobs) is not int or not 1 <= jobs <= MAX_JOBS):
        raise ConfigError(f"{origin}: jobs must be an integer from 1 to {MAX_JOBS}; got {jobs!r}")
    fmt = options.get("format", "mp4")
    if options.get("transparent") and fmt == "mp4":
        raise ConfigError(f"{origin}: mp4 has no alpha channel; use --format webm, gif or png with --transparent")
    if options.get("concat") and fmt not in ("mp4", "webm"):
        raise ConfigError(f"{origin}: --concat joins videos; use --format mp4 or webm, not {fmt}")


def check_common_keys(layers: Iterable[Layer], params: Mapping[str, Iterable[str]],
                      known: Mapping[str, Iterable[str]], scenes: Iterable[type] = ()) -> None:
    """Every un-scoped key must be a parameter of at least one experiment being run.

    ``params``: experiment being run -> its parameter names; ``known``: every experiment -> names;
    ``scenes``: scene classes whose own parameters are named in the message when the key is one of them.
    """
    active = {name: set(keys) for name, keys in params.items()}
    for layer in layers:
        for key in layer.common:
            if any(key in keys for keys in active.values()):
                continue
            owners = [name for name, keys in known.items() if key in set(keys)]
            running = ", ".join(active) or "none"
            if owners:
                raise ConfigError(f"parameter {key!r} ({layer.origin}) is not used by the experiments being run "
                                  f"({running}); it belongs to {', '.join(owners)}: set {owners[0]}.{key}")
            scene_owners = [scene.__name__ for scene in scenes if key in scene_params(scene)]
            if scene_owners:
                raise ConfigError(f"parameter {key!r} ({layer.origin}) belongs to scene {scene_owners[0]}: "
                                  f"set {scene_owners[0]}.{key}")
            names = sorted(set().union(*active.values())) if active else []
            raise ConfigError(f"unknown parameter {key!r} ({layer.origin}); "
                              + (f"known: {', '.join(names)}" if names else "no experiment is being run"))


def experiment_overrides(layers: Iterable[Layer], experiment: str, param_names: Iterable[str]) -> dict[str, Any]:
    """The overrides of one experiment: per layer, its common keys (those the experiment has), then its
    scoped keys; later layers win. Values are not converted here (``build_runs`` does it)."""
    names = set(param_names)
    out: dict[str, Any] = {}
    for layer in layers:
        out.update({k: v for k, v in layer.common.items() if k in names})
        out.update(layer.experiments.get(experiment, {}))
    return out


# -- scene parameters ---------------------------------------------------------------------------

DEFAULT_SOURCE = "default"  # the source of a value no layer sets


def experiment_sources(layers: Iterable[Layer], experiment: str, param_names: Iterable[str]) -> dict[str, str]:
    """Where each value of :func:`experiment_overrides` comes from, by the same rule (later layers win, a scoped
    key over a common one of its layer): ``{name: layer origin}`` ("--set", "--model", "--trace", the --config
    file's path); a name no layer sets is left out (its source is :data:`DEFAULT_SOURCE`)."""
    names = set(param_names)
    out: dict[str, str] = {}
    for layer in layers:
        out.update({k: layer.origin for k in layer.common if k in names})
        out.update({k: layer.origin for k in layer.experiments.get(experiment, {})})
    return out


def scene_sources(layers: Iterable[Layer], scene: type) -> dict[str, str]:
    """Where each value of :func:`scene_overrides` comes from: ``{attribute: layer origin}``, later layers win."""
    out: dict[str, str] = {}
    for layer in layers:
        out.update({k: layer.origin for k in layer.scenes.get(scene.__name__, {})})
    return out


def job_sources(layers: Iterable[Layer], scene: type, param_names: Iterable[str]) -> dict[str, dict[str, str]]:
    """Where every parameter of one render job came from, for its ``.render.json``: ``{"experiment": {name:
    source}, "scene": {attribute: source}}`` over every parameter of the scene's experiment (``param_names``) and
    every knob of the scene (:func:`scene_params`); a source is a layer's origin (:func:`experiment_sources`) or
    :data:`DEFAULT_SOURCE` (the scene's ``experiment_defaults`` included)."""
    layers = list(layers)
    experiment = getattr(scene, "experiment", None)
    names = list(param_names)
    set_by = experiment_sources(layers, experiment, names) if experiment else {}
    attrs = scene_sources(layers, scene)
    return {"experiment": {name: set_by.get(name, DEFAULT_SOURCE) for name in names},
            "scene": {name: attrs.get(name, DEFAULT_SOURCE) for name in scene_params(scene)}}


def scene_params(scene: type) -> dict[str, tuple[Any, str]]:
    """A scene's knobs: its public class attributes of a simple type (bool, int, float, str or a tuple
    of those), found on the scene and on its project base classes; -> {name: (default, type name)}.
    UPPER_CASE attributes are constants of the scene's code, not knobs."""
    out: dict[str, tuple[Any, str]] = {}
    for klass in reversed(scene.__mro__):
        if klass.__module__.split(".")[0] in ("manim", "builtins") or klass is object:
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in RESERVED_SCENE_ATTRS or name.isupper():
                continue
            kind = type_name(value)
            if kind is not None:
                out[name] = (getattr(scene, name), kind)
    return out


def scene_overrides(layers: Iterable[Layer], scene: type) -> dict[str, Any]:
    """Converted, validated attribute overrides of ``scene``; later layers win.

    Raises ConfigError for an attribute the scene does not have or a value of the wrong type.
    """
    params = scene_params(scene)
    name = scene.__name__
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.scenes.get(name, {}).items():
            if key not in params:
                has = f"its parameters: {', '.join(params)}" if params else "it has no parameters"
                raise ConfigError(f"unknown parameter {key!r} of scene {name} ({layer.origin}); {has}")
            out[key] = convert_value(f"{name}.{key}", params[key][0], value, finite=True)
            check_limit(scene, key, out[key])
    return out


def check_limit(scene: type, key: str, value: Any) -> None:
    """Raise ConfigError unless ``value`` is within the scene's ``param_limits[key]``: ``(low, high)`` for a
    number (inclusive), or a tuple of the allowed strings. A knob without limits takes any value of its type."""
    limit = getattr(scene, "param_limits", {}).get(key)
    if limit is None:
        return
    label = f"{scene.__name__}.{key}"
    if isinstance(value, str):
        if value not in limit:
            raise ConfigError(f"{label} must be one of {', '.join(limit)}; got {value!r}")
    elif not limit[0] <= value <= limit[1]:
        raise ConfigError(f"{label} must be between {limit[0]} and {limit[1]}; got {value!r}")


# -- the layers of a command, merged and checked (render.py, cli/plan.py) ----------------------------------------

def all_params() -> dict[str, list[str]]:
    """Every experiment's parameter names: ``{experiment: [name, ...]}``."""
    from simulation.experiments import EXPERIMENTS

    return {name: list(exp.params()) for name, exp in EXPERIMENTS.items()}


def parameter_layers(config_data: dict | None, config_file: str | None, sets: Iterable[str],
                     scene_names: list[str] | None, model: str | None = None, trace: str | None = None,
                     twin: str | None = None, texts: Iterable[str] = ()) -> list[Layer]:
    """The parameter layers, later ones win: the --config file's tables (if any), ``--model SPEC`` (the spec of
    experiment model), ``--trace FILE`` / ``--twin FILE`` (its trace and twin), then --set (and ``--text``: your
    own words, :func:`parse_texts`)."""
    from simulation.experiments import EXPERIMENTS

    layers = [config_layer(config_data, config_file, EXPERIMENTS, scene_names)] if config_data is not None else []
    if model:
        layers.append(model_layer(model))
    if trace or twin:
        layers.append(trace_layer(trace, twin))
    layers.append(parse_sets(tuple(sets), EXPERIMENTS, scene_names or []))
    return layers + ([parse_texts(tuple(texts))] if texts else [])


@dataclass(frozen=True)
class ParameterInputs:
    """A command's parameter inputs as click gave them, not yet layered: render.py hands these to the one cli/
    function a command calls (:func:`cli.plan.plan_render`, :func:`cli.plan.lecture_listing`,
    :func:`experiment_runs`), which layers them with :func:`as_layers`."""

    config_data: dict | None = None  # the --config file's tables (read_config), None without --config
    config_file: str | None = None  # its path, the source of its values
    sets: tuple[str, ...] = ()  # --set KEY=VALUE ...
    scene_names: Iterable[str] | None = None  # the scenes whose scoped keys are allowed; None: any (train)
    texts: tuple[str, ...] = ()  # --text Owner.key=TEXT ...
    model: str | None = None  # --model SPEC
    trace: str | None = None  # --trace FILE
    twin: str | None = None  # --twin FILE

    def layers(self) -> list[Layer]:
        """:func:`parameter_layers` of these inputs."""
        return parameter_layers(self.config_data, self.config_file, self.sets,
                                None if self.scene_names is None else list(self.scene_names), self.model, self.trace,
                                self.twin, self.texts)


def as_layers(layers: "list[Layer] | ParameterInputs") -> list[Layer]:
    """``layers`` as a list of :class:`Layer`: built from :class:`ParameterInputs`, or as given."""
    return layers.layers() if isinstance(layers, ParameterInputs) else list(layers)


def refuse_unused_sets(layers: list[Layer], experiments: set[str], scene_names: set[str]) -> None:
    """A scoped ``--set`` for an experiment or a scene this command does not run would change nothing: say so
    (a --config file may hold values for the whole lecture; its unused tables are checked, not refused)."""
    for layer in layers:
        if layer.origin != "--set":
            continue
        for name, values in layer.experiments.items():
            if name not in experiments:
                key = next(iter(values))
                used = ", ".join(sorted(experiments)) or "none"
                raise ConfigError(f"--set {name}.{key}: this command runs no scene of experiment {name} "
                                  f"(its experiments: {used})")
        for name, values in layer.scenes.items():
            if name not in scene_names:
                raise ConfigError(f"--set {name}.{next(iter(values))}: scene {name} is not rendered by this command")


# -- an experiment's raw values, typed: what simulation/ receives ----------------------------------------------

def _seeds(value: Any) -> tuple[int, ...]:
    """``seeds`` from the command line (``"0,1"``) or TOML (``[0, 1]``): distinct ints in [0, MAX_SEED] (the
    message quotes the value as given; :func:`simulation.experiments.check_seeds` checks typed ones alike); None: ``()``."""
    from simulation.config import MAX_SEED, Range

    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        items = tuple(value)
    elif isinstance(value, str):
        items = tuple(part.strip() for part in value.split(",") if part.strip())
    else:
        items = (value,)
    seeds = []
    for item in items:
        try:
            if isinstance(item, (bool, float)):
                raise ValueError
            seeds.append(int(item.strip() if isinstance(item, str) else item))
        except (TypeError, ValueError):
            raise ConfigError(f"seeds must be a comma-separated list of integers; got {shown(value)}") from None
        Range(0, MAX_SEED).check("seeds", seeds[-1])
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds must be distinct; got {shown(value)}")
    return tuple(seeds)


def _literal(key: str, value: Any) -> Any:
    """A factory argument: TOML values as they are; a command-line string read as JSON where it is one (10,
    0.5, true, null, [1, 2], {"a": 1}), True / False / None as Python writes them, else the string itself."""
    import json
    import math

    if not isinstance(value, str):
        return value
    text = value.strip()
    python = {"True": True, "False": False, "None": None}
    if text in python:
        return python[text]
    try:
        parsed = json.loads(text)
    except ValueError:
        return value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise ConfigError(f"model argument {key} must be finite; got {shown(value)}")
    return parsed


def experiment_values(name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The raw values of experiment ``name`` (``--set`` strings such as ``"8,20"``, TOML values, typed values) as
    typed ones, in their order: a config field or an experiment parameter as the type of its default
    (:func:`convert_value`), ``seeds`` as ints, a model factory's argument read as JSON where it is. Raises
    ConfigError (one line) for an unknown experiment or key or a value that is not of its type; ranges and
    choices are checked by :func:`simulation.experiments.build_runs`."""
    from simulation.experiments import get_experiment

    experiment = get_experiment(name)
    config_type = type(experiment.base)
    run_keys, extra = config_type.parameters(), experiment.params_type.defaults()
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in config_type.not_parameters:
            raise ConfigError(f"{key!r} is not a parameter of experiment {experiment.name!r}: it is "
                              + ("computed from the files" if key != "kind" else "the trainer's name"))
        if key in run_keys:
            out[key] = convert_value(key, getattr(experiment.base, key), value)
        elif key == "seeds":
            out[key] = _seeds(value)
        elif key in extra:
            out[key] = _experiment_param(experiment.params_type, key, value)
        elif experiment.open_args:
            out[key] = _literal(key, value)
        else:
            known = sorted(set(run_keys) | set(extra) | {"seeds"})
            raise ConfigError(f"unknown parameter {key!r} for experiment {experiment.name!r}; known: {', '.join(known)}")
    return out


def _experiment_param(params_type: type, name: str, value: Any) -> Any:
    """``value`` as the type of ``params_type``'s field ``name``, its range and choices checked item by item (in
    the order of the keys, as the command line gives them)."""
    from dataclasses import fields

    f = {f.name: f for f in fields(params_type)}[name]
    converted = convert_value(name, f.default, value)
    for item in converted if isinstance(converted, tuple) else (converted,):
        if "range" in f.metadata:
            f.metadata["range"].check(name, item)
        if "choices" in f.metadata and item not in f.metadata["choices"]:
            raise ConfigError(f"{name} must be among {', '.join(f.metadata['choices'])}; got {shown(item)}")
    return converted


def build_runs(name: str, overrides: Mapping[str, Any] | None = None) -> dict[Any, Any]:
    """:func:`simulation.experiments.build_runs` of raw values (``{"depths": "8,20", "seed": "1"}``, a TOML
    file's): ``{RunKey: config}``. Raises ConfigError (one line) for an unknown experiment, key or value."""
    from simulation.experiments import build_runs as typed_runs

    try:
        values = experiment_values(name, overrides or {})
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"experiment {name}: bad parameter value ({exc})") from None
    return typed_runs(name, values)


def scene_runs(experiment: str | None, defaults: Mapping[str, Any], overrides: Mapping[str, Any]
               ) -> tuple[dict[str, Any], dict[Any, Any]]:
    """:func:`simulation.experiments.scene_runs` of raw ``defaults`` (a scene's ``experiment_defaults``) and
    ``overrides``: ``(typed params, {RunKey: config})``."""
    from simulation.experiments import scene_runs as typed_scene_runs

    if not experiment:
        return {}, {}
    return typed_scene_runs(experiment, experiment_values(experiment, defaults), experiment_values(experiment, overrides))


@dataclass
class SceneParameters:
    """Everything one scene takes from the parameter layers, typed (:func:`resolve_scenes`)."""

    params: dict[str, Any]  # its experiment's values: the scene's experiment_defaults, the layers' over them
    runs: dict[Any, Any]  # the runs those build: {RunKey: config}
    attrs: dict[str, Any]  # its own knobs set by the layers (scene_overrides)
    sources: dict[str, dict[str, str]]  # where each value came from (job_sources)


def resolve_scenes(layers: list[Layer], scenes: Iterable[type]) -> dict[str, SceneParameters]:
    """The parameters of each of ``scenes`` under ``layers``, by class name: its experiment's typed values and
    runs (one call into simulation/ for all of them), its knobs and their sources. Raises ConfigError (one line,
    naming the scene and its experiment for a bad value)."""
    from simulation.experiments import get_experiment, scenes_runs

    requests, names = {}, {}
    for scene in scenes:
        experiment = getattr(scene, "experiment", None)
        names[scene] = list(get_experiment(experiment).params()) if experiment else []
        try:  # a scene's own defaults typed too (a scene of your own may write them as --set would: "0,1")
            defaults = experiment_values(experiment, getattr(scene, "experiment_defaults", {})) if experiment else {}
            values = experiment_values(experiment, experiment_overrides(layers, experiment, names[scene])) \
                if experiment else {}
        except ConfigError as exc:
            raise ConfigError(f"{scene.__name__} (experiment {experiment}): {exc}") from None
        requests[scene.__name__] = (experiment, defaults, values)
    built = scenes_runs(requests)  # the runs trained here and counted by --check are the runs the scenes read
    return {scene.__name__: SceneParameters(*built[scene.__name__], scene_overrides(layers, scene),
                                            job_sources(layers, scene, names[scene])) for scene in names}


def validate_scoped(layers: list[Layer], scenes_by_name: dict[str, type]) -> None:
    """Scoped values of experiments and scenes not being run are checked too: a file is wrong or not."""
    from simulation.experiments import get_experiment

    for name in {name for layer in layers for name in layer.experiments}:
        build_runs(name, experiment_overrides(layers, name, get_experiment(name).params()))
    for name in {name for layer in layers for name in layer.scenes}:
        if name in scenes_by_name:
            scene_overrides(layers, scenes_by_name[name])

def experiment_runs(layers: list[Layer] | ParameterInputs, params: dict[str, list[str]], defaults: dict[str, dict] | None = None,
                    seed: int | None = None, validate: bool = True) -> dict[str, dict[str, Any]]:
    """The runs of each experiment of ``params`` (``{name: its parameter names}``) under ``layers``, over
    ``defaults`` (``{name: {key: value}}``, e.g. the lecture's seeds): ``{name: {RunKey: config}}``, for
    ``train`` (``seed``: --seed, which must agree with a seed set otherwise) and ``explore``. ``validate``:
    also check the layers' values for experiments not run. Raises ConfigError with one line."""
    layers = as_layers(layers)
    check_common_keys(layers, params, all_params())
    if validate:
        validate_scoped(layers, {})
    refuse_unused_sets(layers, set(params), set())
    out = {}
    for name, keys in params.items():
        overrides = {**(defaults or {}).get(name, {}), **experiment_overrides(layers, name, keys)}
        if seed is not None:
            if "seed" in overrides and convert_value("seed", 0, overrides["seed"]) != seed:
                raise ConfigError(f"--seed {seed} and seed={overrides['seed']} (--set or --config) disagree; "
                                  "give one")
            overrides["seed"] = seed
        out[name] = build_runs(name, overrides)
    return out
