"""The command line: train real networks, render the lecture's scenes from their traces.

Example::

    python render.py list
    python render.py render IdentityHighway ChainRuleProduct --quality l --set depth=12
    python render.py all --config lecture.toml --format webm --concat --jobs 2
    python render.py render IdentityHighway --theme light --format png
    python render.py train vanishing --set depths=8,20 --json
    python render.py inspect .cache/traces/<digest>.npz

Every command checks all of its input before it does any work, answers bad input with one line and a
non-zero exit, writes every file atomically, and ends by printing the files it wrote. Parameters:
defaults < ``--config FILE.toml`` < ``--set key=value`` (see cli/params.py for the file's tables).
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click

from cli.jobs import describe_cap
from cli.params import FORMATS, LANGS, QUALITIES, RENDER_DEFAULTS, THEMES

__all__ = ["cli"]

log = logging.getLogger("render")


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")
    # dask.distributed logs every scheduler/worker start and stop at INFO and a worker killed at shut-down as a
    # WARNING, in this process and in the cluster's worker processes (which inherit the environment): only
    # its errors are shown unless --verbose. Its logging is configured from dask's config when it is imported.
    import os

    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "info" if verbose else "error")
    if "distributed" in sys.modules:
        logging.getLogger("distributed").setLevel(logging.INFO if verbose else logging.ERROR)
    for name in ("simulation", "render"):
        logging.getLogger(name).setLevel(logging.INFO)


@contextmanager
def _user_errors() -> Iterator[None]:
    """Bad input and failed renders end as one line on stderr and exit status 1."""
    from cli.media import RenderError
    from simulation.config import ConfigError
    from simulation.trace import TraceError

    from simulation.sweep import SweepError

    try:
        yield
    except (ConfigError, TraceError, RenderError, SweepError) as exc:
        raise click.ClickException(str(exc)) from None


def _scheduler_option(func):
    """``--scheduler tcp://HOST:PORT``: train missing runs on that Dask cluster (docs/sweep.md)."""
    return click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="Train missing runs (and, for render/all/slides/page, render every scene) on this "
                             "running `dask scheduler` (default: $DASK_SCHEDULER_ADDRESS, else this machine; "
                             "docs/cluster.md).")(func)


def _note(message: str) -> None:
    click.echo(message, err=True)


def _report(written: list[Path], unchanged: list[Path] = (), unchanged_heading: str = "up to date (not rendered again):") -> None:
    if unchanged:
        click.echo(unchanged_heading)
        for path in unchanged:
            click.echo(f"  {path}")
    click.echo("wrote:" if written else "wrote: nothing")
    for path in written:
        click.echo(f"  {path}")


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM, so that every ``with`` and ``finally`` on the way out runs
    (private render folders are removed at once), exactly as for Ctrl-C; not an Exception, so no
    ``except Exception`` in a scene or in Manim swallows it."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextmanager
def _sigterm_like_ctrl_c() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the command runs; the previous handler comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class LectureCli(click.Group):
    """Errors end as one line, ``Error: ...``, without click's usage block: exit status 2 for bad
    usage, 1 for anything else; Ctrl-C prints ``Aborted!`` and exits with 130, SIGTERM prints
    ``Terminated`` and exits with 143 (128 + 15), both after removing what the run had half made."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            with _sigterm_like_ctrl_c():
                result = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as exc:
            hint = " (see --help)" if isinstance(exc, click.UsageError) else ""
            click.echo(f"Error: {exc.format_message()}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(130)
        except Terminated:
            click.echo("Terminated", err=True)
            sys.exit(128 + signal.SIGTERM)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=LectureCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Show Manim's own log too.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Explain residual connections with animations driven by real, recorded training runs."""
    _setup_logging(verbose)
    ctx.obj = {"verbose": verbose}


# -- parameters -------------------------------------------------------------------------------

class _Path(click.Path):
    """click.Path that refuses a NUL character with a message (the OS would raise ValueError; a TOML
    [render] output can hold one, a command line cannot)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and "\x00" in value:
            self.fail("a file or folder name cannot contain a NUL character", param, ctx)
        return super().convert(value, param, ctx)


# TOML [render] keys -> the names of the click parameters they give defaults to.
_RENDER_PARAMS = {"quality": "quality", "lang": "lang", "theme": "theme", "format": "fmt",
                  "transparent": "transparent", "output": "output", "jobs": "jobs", "concat": "concat",
                  "voice": "voice"}


def _read_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Eager ``--config``: read the file before every other option, and hand its [render] table to
    click as the command's ``default_map``, so click itself resolves default < file < command line."""
    if value is None:
        return None
    from cli.params import read_config
    from simulation.config import ConfigError

    try:
        data = read_config(value)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    ctx.meta["config_data"] = data
    own = {p.name: p for p in ctx.command.params}
    # A value this command's option cannot take is not for it (format = "mp4" is render's, not slides' html|pptx|pdf).
    fits = lambda p, v: not isinstance(p.type, click.Choice) or v in p.type.choices
    file_defaults = {_RENDER_PARAMS[k]: v for k, v in data.get("render", {}).items()
                     if _RENDER_PARAMS[k] in own and fits(own[_RENDER_PARAMS[k]], v)}
    ctx.default_map = {**(ctx.default_map or {}), **file_defaults}
    return value


def _param_options(func):
    func = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                        help="Set a parameter: name (every experiment that has it), experiment.name or "
                             "Scene.name. Repeatable; wins over --config.")(func)
    func = click.option("--config", "config_file", type=_Path(dir_okay=False), default=None, is_eager=True,
                        callback=_read_config, expose_value=True,
                        help="TOML file with [render], [params], [experiments.NAME], [scenes.NAME] tables.")(func)
    return func


def _layers(ctx: click.Context, sets: tuple[str, ...], scene_names: list[str] | None) -> list:
    """The parameter layers, later ones win: the --config file's tables (if any), then --set."""
    from cli.params import config_layer, parse_sets
    from simulation.experiments import EXPERIMENTS

    data = ctx.meta.get("config_data")
    layers = [config_layer(data, ctx.params["config_file"], EXPERIMENTS, scene_names)] if data is not None else []
    return layers + [parse_sets(sets, EXPERIMENTS, scene_names or [])]


def _refuse_unused_sets(layers: list, experiments: set[str], scene_names: set[str]) -> None:
    """A scoped ``--set`` for an experiment or a scene this command does not run would change nothing: say so
    (a --config file may hold values for the whole lecture; its unused tables are checked, not refused)."""
    from simulation.config import ConfigError

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


def _validate_scoped(layers: list, scenes_by_name: dict[str, type]) -> None:
    """Scoped values of experiments and scenes not being run are checked too: a file is wrong or not."""
    from cli.params import experiment_overrides, scene_overrides
    from simulation.experiments import get_experiment

    for name in {name for layer in layers for name in layer.experiments}:
        _build(name, experiment_overrides(layers, name, get_experiment(name).params()))
    for name in {name for layer in layers for name in layer.scenes}:
        if name in scenes_by_name:
            scene_overrides(layers, scenes_by_name[name])


def _build(experiment: str, overrides: dict[str, Any]) -> dict:
    """``build_runs``, with a converter's bare ValueError or TypeError turned into a ConfigError."""
    from simulation.config import ConfigError
    from simulation.experiments import build_runs

    try:
        return build_runs(experiment, overrides)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"experiment {experiment}: bad parameter value ({exc})") from None


def _all_params() -> dict[str, list[str]]:
    from simulation.experiments import EXPERIMENTS

    return {name: list(exp.params()) for name, exp in EXPERIMENTS.items()}


# -- list, train, inspect ---------------------------------------------------------------------

@cli.command("list")
@_param_options
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable listing.")
@click.pass_context
def list_command(ctx: click.Context, config_file: str | None, sets: tuple[str, ...], as_json: bool) -> None:
    """Scenes (in lecture order) and experiments, with every parameter's type, default and value."""
    import scenes
    from cli.params import check_common_keys, experiment_overrides, scene_overrides, scene_params
    from simulation.experiments import EXPERIMENTS, split_params

    with _user_errors():
        by_name = {s.__name__: s for s in scenes.SCENES_IN_ORDER}
        layers = _layers(ctx, sets, list(by_name))
        check_common_keys(layers, _all_params(), _all_params())
        _validate_scoped(layers, by_name)
        listing: dict[str, Any] = {"scenes": [], "model_scenes": [], "experiments": {}}
        by_name.update({s.__name__: s for s in scenes.MODEL_SCENES})
        for scene in scenes.ALL_SCENES:
            values = scene_overrides(layers, scene)
            listing["scenes" if scene in scenes.SCENES_IN_ORDER else "model_scenes"].append({
                "name": scene.__name__, "description": (scene.__doc__ or "").strip().split("\n")[0],
                "experiment": getattr(scene, "experiment", None),
                "params": {k: {"type": t, "default": d, "value": values.get(k, d)}
                           for k, (d, t) in scene_params(scene).items()},
            })
        for name, exp in EXPERIMENTS.items():
            overrides = experiment_overrides(layers, name, exp.params())
            _build(name, overrides)
            base, extra = split_params(exp, overrides)
            listing["experiments"][name] = {
                "description": exp.description, "source": exp.source,
                "params": {k: {"type": t, "default": d, "value": getattr(base, k, extra.get(k, d))}
                           for k, (d, t) in exp.params().items()},
            }
    listing["voices"] = _voices()
    if as_json:
        click.echo(json.dumps(listing, indent=2, default=list))
        return
    click.echo("Scenes, in lecture order (render.py render NAME; --set NAME.param=value):")
    for scene in listing["scenes"]:
        click.echo(f"  {scene['name']:<24} {scene['description']}")
        click.echo(f"  {'':<24} experiment: {scene['experiment'] or '-'}")
        if scene["params"]:
            _echo_params(scene["params"])
    click.echo("\nScenes of your own network (experiment model; render.py render NAME --model SPEC):")
    variants = {v.__name__: k for k, v in scenes.MODEL_VARIANTS.items()}
    for scene in listing["model_scenes"]:
        click.echo(f"  {scene['name']:<24} {scene['description']}")
        click.echo(f"  {'':<24} with --model, {variants.get(scene['name'], scene['name'])} draws this")
    click.echo("\nExperiments (--set param=value for every experiment, --set NAME.param=value for one):")
    for name, exp in listing["experiments"].items():
        click.echo(f"  {name:<24} {exp['description']}")
        click.echo(f"  {'':<24} source: {exp['source']}")
        _echo_params(exp["params"])
    click.echo("\nVoices (--voice NAME; a bare --voice picks the language's own):")
    for name, v in listing["voices"].items():
        click.echo(f"  {name:<24} {v['lang']}: {v['description']}")
        click.echo(f"  {'':<24} licence: {v['licence']}")
        click.echo(f"  {'':<24} {'installed' if not v['missing'] else 'missing: ' + v['missing']}")


def _voices() -> dict[str, dict[str, Any]]:
    from scenes.voice import VOICES, missing_voice

    return {name: {"lang": e.lang, "description": e.description, "licence": e.licence,
                   "missing": missing_voice(name)} for name, e in VOICES.items()}


def _show(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def _echo_params(params: dict[str, dict[str, Any]]) -> None:
    parts = []
    for key, p in params.items():
        changed = p["value"] != p["default"] and _show(p["value"]) != _show(p["default"])
        note = f"{p['type']}, default {_show(p['default'])}" if changed else p["type"]
        parts.append(f"{key}={_show(p['value'])} ({note})")
    line = ""
    for part in parts:  # wrap between parameters, never inside one
        if line and len(line) + 2 + len(part) > 100:
            click.echo(f"  {'':<24} {line}")
            line = ""
        line = f"{line}  {part}" if line else part
    if line:
        click.echo(f"  {'':<24} {line}")


@cli.command()
@click.argument("experiment")
@_param_options
@click.option("--seed", type=int, default=None, help="Seed of every run (same as --set seed=N).")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@_scheduler_option
@click.pass_context
def train(ctx: click.Context, experiment: str, config_file: str | None, sets: tuple[str, ...], seed: int | None,
          as_json: bool, scheduler: str | None) -> None:
    """Train the runs of EXPERIMENT (or load them from the cache) and print a summary."""
    from cli.media import check_cache_dir
    from cli.params import check_common_keys, experiment_overrides
    from simulation.cache import get_traces, is_cached, trace_path
    from simulation.config import ConfigError
    from simulation.experiments import get_experiment
    from simulation.summary import summarize
    from simulation.values import convert_value

    with _user_errors():
        params = list(get_experiment(experiment).params())
        layers = _layers(ctx, sets, None)
        check_common_keys(layers, {experiment: params}, _all_params())
        _validate_scoped(layers, {})
        _refuse_unused_sets(layers, {experiment}, set())
        overrides = experiment_overrides(layers, experiment, params)
        if seed is not None:
            if "seed" in overrides and convert_value("seed", 0, overrides["seed"]) != seed:
                raise ConfigError(f"--seed {seed} and seed={overrides['seed']} (--set or --config) disagree; "
                                  "give one")
            overrides["seed"] = seed
        runs = _build(experiment, overrides)
        check_cache_dir()
        fresh = [cfg for cfg in runs.values() if not is_cached(cfg)]
        traces = get_traces(list(runs.values()), scheduler=scheduler)
    summary = {name: {"trace": str(trace_path(cfg)), **summarize(t).to_dict()} for (name, cfg), t in zip(runs.items(), traces)}
    if as_json:
        from simulation.seeds import summarize_seeds

        click.echo(json.dumps({"experiment": experiment, "runs": summary, "seeds": summarize_seeds(summary)},
                              indent=2))
    else:
        for name, s in summary.items():
            status = f"diverged at step {s['diverged_step']}, {_diverged_where(s['diverged_layer'])}" if s["diverged"] else "finite"
            click.echo(f"{name:<24} loss {_fmt(s['final_loss'], '.4g')}  error {_fmt(s['final_error'], '.3f')}  "
                       f"test error {_fmt(s['final_test_error'], '.3f')}  first/last grad_norm at step 0 "
                       f"{_fmt(s['grad_ratio_step0'], '.3g')}  {status}")
    _note(f"traces: {len(fresh)} trained, {len(runs) - len(fresh)} from the cache")
    if not as_json:
        _report([trace_path(cfg) for cfg in fresh], [trace_path(c) for c in runs.values() if c not in fresh],
                "from the cache (not trained again):")


def _fmt(value: float | None, spec: str) -> str:
    """A summary figure for the terminal; None (NaN or inf in the trace, e.g. after divergence) as 'n/a'."""
    return "n/a" if value is None else format(value, spec)


@cli.command()
@click.argument("trace_file", type=_Path(dir_okay=False))
def inspect(trace_file: str) -> None:
    """Print a trace's metadata, array shapes and summary as JSON."""
    from simulation.summary import summarize
    from simulation.trace import Trace, TraceError

    with _user_errors():
        trace = Trace.load(trace_file)
        try:
            summary = summarize(trace)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise TraceError(f"trace {trace_file} lacks what a summary needs ({type(exc).__name__}: {exc})") from None
    click.echo(json.dumps({"meta": trace.meta.to_dict(), "arrays": {k: list(v.shape) for k, v in trace.arrays.items()},
                           "summary": summary.to_dict()}, indent=2))


# -- render -----------------------------------------------------------------------------------

def _scene_options(func):
    """What decides how a scene looks, shared by every command that renders scenes (render, all, slides):
    --set/--config, --quality, --lang and --theme."""
    func = _param_options(func)
    func = click.option("--theme", type=click.Choice(THEMES), default=RENDER_DEFAULTS["theme"], show_default=True,
                        help="dark, or light for projectors in bright halls (scenes/theme.py).")(func)
    func = click.option("--lang", type=click.Choice(LANGS), default=RENDER_DEFAULTS["lang"], show_default=True)(func)
    func = click.option("--quality", "-q", type=click.Choice(list(QUALITIES)), default=RENDER_DEFAULTS["quality"],
                        show_default=True, help="l=480p15, m=720p30, h=1080p60, k=2160p60.")(func)
    return func


def _voice_not_a_scene(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--voice SCENE``: click reads a word after a bare --voice as its value; say so instead of failing
    later with "missing argument SCENE" or "unknown voice"."""
    if value is None or value == "auto" or value.startswith("-"):
        return value
    import scenes

    if value in {s.__name__ for s in scenes.ALL_SCENES}:
        raise click.BadParameter(f"{value!r} is a scene, not a voice: put the scene first "
                                 f"({ctx.info_name} {value} --voice) or name the voice (--voice en-piper)", ctx, param)
    return value


def _voice_option(func):
    """``--voice [NAME]``, shared by every command that renders (render, all, slides)."""
    return click.option("--voice", default=None, metavar="NAME", is_flag=False, flag_value="auto",
                        callback=_voice_not_a_scene, help="Speak the narration with an offline voice (`render.py list` names them: en-piper, "
                             "zh-espeak); a bare --voice picks the language's own. Off by default.")(func)


def _render_options(func, formats: tuple[str, ...] = FORMATS, default_format: str = RENDER_DEFAULTS["format"],
                    format_help: str = "png = a still of the last frame."):
    """The options every rendering command takes (``slides`` and ``page`` too, with their own --format)."""
    func = _voice_option(func)
    func = _scheduler_option(func)
    func = click.option("--check", is_flag=True,
                        help="Check every input and say what would be trained and rendered; write nothing.")(func)
    func = click.option("--jobs", "-j", type=click.IntRange(min=1), default=RENDER_DEFAULTS["jobs"],
                        help="Scenes rendered at once, each in its own process. " + describe_cap())(func)
    func = click.option("--output", "-o", type=_Path(file_okay=False), default=RENDER_DEFAULTS["output"],
                        show_default=True, help="Folder for the files; they land in OUTPUT/<480p15>/<lang>/.")(func)
    func = click.option("--transparent/--opaque", default=RENDER_DEFAULTS["transparent"],
                        help="Transparent background (webm, gif, png).")(func)
    func = click.option("--format", "fmt", type=click.Choice(formats), default=default_format,
                        show_default=True, help=format_help)(func)
    return _scene_options(func)


def _options(ctx: click.Context) -> dict[str, Any]:
    """The render options as click resolved them (default < the --config file's default_map < command
    line), keyed like RENDER_DEFAULTS; ``concat`` as the file set it for a command without --concat."""
    file_render = (ctx.meta.get("config_data") or {}).get("render", {})
    out = {key: ctx.params[param] for key, param in _RENDER_PARAMS.items() if param in ctx.params}
    out.setdefault("concat", file_render.get("concat", RENDER_DEFAULTS["concat"]))
    return out


def _resolve_scenes(names: tuple[str, ...]) -> list[type]:
    import scenes
    from cli.media import load_scene
    from simulation.config import ConfigError

    by_name = {s.__name__: s for s in scenes.ALL_SCENES}
    out = []
    for name in names:
        if name in by_name:
            out.append(by_name[name])
        elif ":" in name:
            module, _, cls = name.partition(":")
            out.append(load_scene(module, cls))
        else:
            raise ConfigError(f"unknown scene {name!r}; available: {', '.join(by_name)} (or module:Class)")
    return out


@cli.command()
@click.argument("scene_names", nargs=-1, required=True, metavar="SCENE...")
@_render_options
@click.pass_context
def render(ctx: click.Context, scene_names: tuple[str, ...], **_: Any) -> None:
    """Render SCENE... (names from `render.py list`, or module:Class for a scene of your own)."""
    with _user_errors():
        scenes = _resolve_scenes(scene_names)
    _render(ctx, scenes, concat_allowed=False)


@cli.command("all")
@_render_options
@click.option("--concat/--no-concat", default=False, help="Also join the scenes into one lecture video.")
@click.pass_context
def all_command(ctx: click.Context, **_: Any) -> None:
    """Render the whole lecture in order."""
    import scenes

    _render(ctx, list(scenes.SCENES_IN_ORDER), concat_allowed=True)


def _render(ctx: click.Context, scenes: list[type], concat_allowed: bool, video_only: bool = False,
            report: bool = True) -> tuple[list, list[Path], list[Path]] | None:
    """Render ``scenes`` with the context's options; returns (jobs, written, unchanged), None after --check. ``video_only``: mp4,
    opaque, whatever --format and the file say (decks and the page play the videos)."""
    import scenes as scene_package
    from cli.media import (INSTALL_COMMAND, RenderError, RenderJob, check_cache_dir, check_output_dir, check_voice,
                           concat_lecture, missing_tools, render_job, source_digest, up_to_date)
    from cli.jobs import check_jobs, default_jobs
    from cli.params import check_common_keys, check_render_options, experiment_overrides, scene_overrides
    from simulation.cache import is_cached
    from simulation.config import ConfigError
    from simulation.experiments import get_experiment
    from simulation.memory import check_memory
    from simulation.sweep import scheduler_address

    verbose = ctx.obj["verbose"] if ctx.obj else False
    with _user_errors():
        # 1. Every input, before any work.
        by_name = {s.__name__: s for s in [*scene_package.ALL_SCENES, *scenes]}
        layers = _layers(ctx, ctx.params["sets"], list(by_name))
        options = _options(ctx)
        if video_only:
            options.update({"format": "mp4", "transparent": False, "concat": False})
        if options["concat"] and not concat_allowed:
            raise ConfigError("concat joins the whole lecture: use `render.py all --concat`")
        check_render_options(options)
        active = {}
        for scene in scenes:
            if getattr(scene, "experiment", None):
                active[scene.experiment] = list(get_experiment(scene.experiment).params())
        check_common_keys(layers, active, _all_params(), scenes)
        _validate_scoped(layers, by_name)
        _refuse_unused_sets(layers, set(active), {s.__name__ for s in scenes})
        # 2. Tools Manim needs (and the voice), and the output folder.
        missing = missing_tools(options["lang"])
        if missing:
            raise RenderError(f"missing {', '.join(missing)}; install with: {INSTALL_COMMAND}")
        options["voice"] = check_voice(options["voice"], options["lang"], options["format"])
        output = Path(options["output"]).expanduser().absolute()
        check_output_dir(output)
        check_cache_dir()
        # 3. One job per scene; its key says whether the files on disk are still current.
        jobs, runs_of = [], {}
        for scene in scenes:
            experiment = getattr(scene, "experiment", None)
            # the scene's own defaults for its experiment (e.g. its seeds) under the user's settings, as its setup
            # merges them: the runs trained here and counted by --check are the runs the scene reads
            params = {**getattr(scene, "experiment_defaults", {}),
                      **experiment_overrides(layers, experiment, active[experiment])} if experiment else {}
            try:
                runs = _build(experiment, params) if experiment else {}
            except ConfigError as exc:
                raise ConfigError(f"{scene.__name__} (experiment {experiment}): {exc}") from None
            job = RenderJob(scene=scene.__name__, module=scene.__module__, params=params,
                            attrs=scene_overrides(layers, scene), traces={n: c.digest() for n, c in runs.items()},
                            source=source_digest(scene), quality=options["quality"], lang=options["lang"],
                            theme=options["theme"], format=options["format"], voice=options["voice"],
                            transparent=options["transparent"], output=str(output), verbose=verbose)
            jobs.append(job)
            runs_of[job.scene] = list(runs.values())
        unchanged, todo = [], []
        for job in jobs:
            files = up_to_date(job.primary, job.key())
            if files is None:
                todo.append(job)
            else:
                unchanged += files
        # 4. Where and how many at once: a cluster, or this machine's cores as memory permits (cli/jobs.py).
        configs = list(dict.fromkeys(c for job in todo for c in runs_of[job.scene]))  # lecture order
        fresh = [c for c in configs if not is_cached(c)]
        for config in fresh:  # a run that cannot fit is refused before anything starts
            check_memory(config)
        scheduler = scheduler_address(ctx.params.get("scheduler"))
        cluster = scheduler not in (None, "local")
        n_jobs = options["jobs"]
        if n_jobs is not None:
            check_jobs(n_jobs, options["quality"])
        else:
            n_jobs = default_jobs(options["quality"])
        pipeline = cluster or (n_jobs > 1 and len(todo) > 1)
        if ctx.params.get("check"):
            where = f"on {scheduler}" if cluster else f"{min(n_jobs, max(len(todo), 1))} at once"
            click.echo(f"check: the input is valid; {len(todo)} of {len(jobs)} scenes would be rendered ({where}), "
                       f"{len(fresh)} of {len(configs)} traces trained")
            return
        if configs:
            _note(f"traces: {len(fresh)} to train, {len(configs) - len(fresh)} from the cache")
        _note(f"scenes: {len(todo)} to render, {len(jobs) - len(todo)} up to date")
        # 5. Train in lecture order and render each scene as soon as its traces are cached; then join.
        written: list[Path] = []
        try:
            if pipeline:
                done, failures = _render_pipeline(todo, fresh, scheduler if cluster else None, n_jobs,
                                                  options["quality"], explicit=options["jobs"] is not None)
                written += done
                if failures:
                    raise RenderError(f"{len(failures)} of {len(todo)} scenes failed: " + "; ".join(failures))
            else:
                if fresh:
                    _train(fresh, scheduler, options["quality"])
                for index, job in enumerate(todo, 1):
                    _note(f"rendering {job.scene} ({index}/{len(todo)})")
                    written += render_job(job, by_name[job.scene], progress=sys.stderr.isatty())
            if options["concat"]:
                files, wrote = concat_lecture(jobs)
                (written if wrote else unchanged).extend(files)
        except (RenderError, ConfigError):
            _report(written, unchanged)
            raise
    if report:
        _report(written, unchanged)
    return jobs, written, unchanged


# -- slides and the page ----------------------------------------------------------------------

DECK_FORMATS = ("html", "pptx", "pdf")


def _render_clips(ctx: click.Context, scene_names: tuple[str, ...]):
    """Render what is missing of SCENE... (default: the lecture) as web-ready mp4 for a deck or the page;
    (jobs, clips, written, unchanged), or None after --check."""
    from cli.deck import load_clip

    with _user_errors():
        scenes = _scenes_or_lecture(scene_names)
    rendered = _render(ctx, scenes, concat_allowed=False, video_only=True, report=False)
    if rendered is None:
        return None
    jobs, written, unchanged = rendered
    with _user_errors():
        clips = [load_clip(job.primary) for job in jobs]
    return jobs, clips, written, unchanged


@cli.command()
@click.argument("scene_names", nargs=-1, metavar="[SCENE...]")
@functools.partial(_render_options, formats=DECK_FORMATS, default_format="html",
                   format_help="html: reveal.js deck (offline); pptx: slides with video and notes; pdf: handout.")
@click.pass_context
def slides(ctx: click.Context, scene_names: tuple[str, ...], **_: Any) -> None:
    """A deck with one slide per beat (narration point) of SCENE... (default: the whole lecture, in order).

    Renders what is missing first (mp4), then writes OUTPUT/<480p15>/<lang>/slides/index.html (html),
    slides.pptx or slides.pdf. Keys in the html deck: -> / space next, <- back, S speaker notes, F full screen."""
    from cli.deck import reveal_dir, write_html_deck, write_pdf, write_pptx

    deck_format = ctx.params["fmt"]
    with _user_errors():
        if deck_format == "html":
            reveal_dir()  # before any render: reveal.js is installed
    rendered = _render_clips(ctx, scene_names)
    if rendered is None:  # --check: nothing is written
        return
    jobs, clips, written, unchanged = rendered
    with _user_errors():
        folder = jobs[0].final_dir
        light = ctx.params.get("theme") == "light"  # --theme, where the render options have it
        if deck_format == "html":
            written += write_html_deck(clips, folder / "slides", jobs[0].lang, theme="white" if light else "black")
        elif deck_format == "pptx":
            written.append(write_pptx(clips, folder / "slides.pptx", jobs[0].lang))
        else:
            written.append(write_pdf(clips, folder / "slides.pdf"))
    _report(written, unchanged)


@cli.command()
@click.argument("scene_names", nargs=-1, metavar="[SCENE...]")
@functools.partial(_render_options, formats=("html",), default_format="html", format_help="The page is HTML.")
@click.pass_context
def page(ctx: click.Context, scene_names: tuple[str, ...], **_: Any) -> None:
    """One web page with every clip of SCENE... (default: the whole lecture) in order: chapters, subtitles in
    English and Chinese, the numbers each clip showed, its parameters and trace summaries.

    Writes OUTPUT/<480p15>/<lang>/page/lecture.html and its files; copy the page/ folder to publish it."""
    from cli.page import write_page

    rendered = _render_clips(ctx, scene_names)
    if rendered is None:  # --check: nothing is written
        return
    jobs, clips, written, unchanged = rendered
    with _user_errors():
        written += write_page(clips, jobs[0].final_dir / "page", jobs[0].lang,
                              light=ctx.params.get("theme") == "light")
    _report(written, unchanged)


def _diverged_where(layer: int | None) -> str:
    """Where a run diverged, blocks counted from 1 as the scenes count them (``layer`` is 0-based; -1 or
    None: the stem, the head or the loss)."""
    return f"block {layer + 1}" if layer is not None and layer >= 0 else "stem, head or loss"


def _scenes_or_lecture(names: tuple[str, ...]) -> list[type]:
    import scenes

    return _resolve_scenes(names) if names else list(scenes.SCENES_IN_ORDER)


def _train(configs: list, scheduler: str | None, quality: str) -> None:
    """Train ``configs`` before a render in this process: here (torch stays loaded) when this process, a
    trainer and a render worker fit in the tree budget together, else in a trainer process that hands
    its memory back before the render (cli/jobs.py)."""
    from cli.jobs import MiB, TRAINER_BASE_MIB, MAIN_MIB, tree_budget, worker_bytes
    from cli.media import RenderError
    from cli.pipeline import Trainer
    from simulation.cache import get_traces
    from simulation.memory import estimate

    trainer = TRAINER_BASE_MIB * MiB + max(estimate(c).total for c in configs)
    if scheduler is not None or MAIN_MIB * MiB + trainer + worker_bytes(quality) <= tree_budget():
        get_traces(configs, scheduler=scheduler)
        return
    errors = []
    Trainer(configs).run(lambda digest, error: errors.append(f"run {digest}: {error}") if error else None)
    if errors:
        raise RenderError("training failed: " + "; ".join(errors))


def _render_pipeline(todo: list, fresh: list, scheduler: str | None, n_jobs: int, quality: str,
                     explicit: bool) -> tuple[list[Path], list[str]]:
    """Train ``fresh`` in lecture order while the scenes of ``todo`` render as their traces arrive, on
    the cluster at ``scheduler`` or in up to ``n_jobs`` local processes (cli/pipeline.py); (written,
    failures). Ctrl-C and SIGTERM stop the trainer and every render."""
    from cli.jobs import MiB, TRAINER_BASE_MIB, render_slots, training_room
    from cli.pipeline import ClusterPool, ClusterTrainer, LocalPool, RunQueue, Trainer, TrainingHelper, run_pipeline
    from simulation.memory import estimate

    pool = ClusterPool(scheduler) if scheduler else LocalPool(n_jobs)
    trainer, helper, slots = None, None, n_jobs
    if fresh and scheduler:
        trainer = ClusterTrainer(fresh, scheduler)
    elif fresh:
        sizes = [estimate(c).total for c in fresh]
        # A second trainer may use an idle render slot when two trainers fit where a trainer and renders do.
        queue = RunQueue(fresh, sizes, TRAINER_BASE_MIB * MiB, training_room(explicit) if n_jobs > 1 else None,
                         backlog=lambda: pool.waiting > 0)
        trainer = Trainer(fresh, queue=queue)
        helper = TrainingHelper(queue, pool) if n_jobs > 1 else None
        slots = render_slots(n_jobs, quality, TRAINER_BASE_MIB * MiB + max(sizes), explicit)

    def stop_signal() -> int:
        return signal.SIGTERM if isinstance(sys.exc_info()[1], Terminated) else signal.SIGINT

    return run_pipeline(todo, pool, trainer, slots, _note, stop_signal, progress=sys.stderr.isatty(), helper=helper)


@cli.command("_worker", hidden=True)
@click.argument("job_json")
@click.pass_context
def worker(ctx: click.Context, job_json: str) -> None:
    """Render one job given as JSON (used by --jobs and on cluster workers); prints {"files": [...]}.
    Refuses a job whose traces this checkout's simulation code would digest otherwise (a cluster worker
    started from another commit), which would otherwise train runs of its own. (The scene's source digest
    is not compared: it depends on which project modules a process has imported.)"""
    import os

    from cli.media import RenderError, RenderJob, load_scene, render_job
    from cli.params import convert_value, scene_params
    from cli.pipeline import DIE_WITH_PARENT, die_with_parent

    if os.environ.get(DIE_WITH_PARENT):
        die_with_parent()
    with _user_errors():
        job = RenderJob.from_json(job_json)
        scene = load_scene(job.module, job.scene)
        if getattr(scene, "experiment", None):
            runs = _build(scene.experiment, {**getattr(scene, "experiment_defaults", {}), **job.params})
            if {n: c.digest() for n, c in runs.items()} != job.traces:
                raise RenderError(f"{job.scene}: this machine's simulation code gives other trace digests than "
                                  "the client's (start the workers from a checkout of the same commit)")
        defaults = scene_params(scene)
        job.attrs = {k: convert_value(f"{job.scene}.{k}", defaults[k][0], v, finite=True) for k, v in job.attrs.items()}
        files = render_job(job, scene)
    click.echo(json.dumps({"files": [str(p) for p in files]}))


if __name__ == "__main__":
    cli()
