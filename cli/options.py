"""The command line's shared parts: option decorators, the error and signal handling, the terminal output.

Example::

    @cli.command()
    @render_options
    @click.pass_context
    def render(ctx, scene_names, **_): ...

render.py holds the commands; what several of them share lives here (click, no manim, no torch). Parameters:
defaults < ``--config FILE.toml`` < ``--set key=value`` (:func:`param_options`, :func:`read_config_option`).
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click

from cli import QUIET_CTRL_C
from cli.doctor import PreflightCommand
from cli.jobs import describe_cap
from cli.params import FORMATS, LANGS, QUALITIES, RENDER_DEFAULTS, THEMES

__all__ = ["setup_logging", "user_errors", "note", "report", "Terminated", "LectureCli", "scheduler_option",
           "PathType", "param_options", "scene_options", "voice_option", "render_options", "resolved_options",
           "voices", "echo_params", "figure", "diverged_where", "RENDER_PARAMS", "echo_listing",
           "echo_run_summaries", "train_summary", "model_option", "short_message", "TracePathType", "LangChoice"]


def setup_logging(verbose: bool) -> None:
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
def user_errors() -> Iterator[None]:
    """Bad input and failed renders end as one line on stderr and exit status 1."""
    from cli.media import RenderError
    from simulation.config import ConfigError
    from simulation.trace import TraceError

    from simulation.sweep import SweepError

    try:
        yield
    except (ConfigError, TraceError, RenderError, SweepError) as exc:
        raise click.ClickException(str(exc)) from None

def note(message: str) -> None:
    click.echo(message, err=True)


def report(written: list[Path], unchanged: list[Path] = (), unchanged_heading: str = "up to date (not rendered again):",
           opens: tuple[str, ...] = ("clip", "still")) -> None:
    """The files to open (kinds of cli/report.py), one line for the rest (every file with --verbose), the time."""
    from cli.report import file_kind, format_duration, report_lines

    ctx = click.get_current_context(silent=True)
    obj = (ctx.find_root().obj if ctx else None) or {}
    for line in report_lines(list(written), list(unchanged), set(opens), obj.get("verbose", False), unchanged_heading):
        click.echo(line)
    if "started" in obj:
        hidden = not obj["verbose"] and any(file_kind(p) not in opens for p in [*written, *unchanged])
        note(f"done in {format_duration(time.monotonic() - obj['started'])}"
             + (" (every file: render.py -v COMMAND ...)" if hidden else ""))


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
    if signal.getsignal(signal.SIGINT) is QUIET_CTRL_C:  # render.py started: Ctrl-C is click's Abort from now on
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_LONG_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.){120,}'" + r'|"(?:[^"\\\n]|\\.){120,}"')


def short_message(message: str, limit: int = 1000) -> str:
    """An error message as one readable line: a quoted value longer than 120 characters (a hostile --set value can
    be megabytes) keeps its first 60 and last 20, line breaks become spaces, and what is still longer than
    ``limit`` keeps its beginning and its end."""
    message = _LONG_QUOTED.sub(lambda m: f"{m[0][:61]}...{m[0][-21:]}", " ".join(message.splitlines()))
    return message if len(message) <= limit else f"{message[:limit * 2 // 3]} ... {message[-limit // 3:]}"


class LectureCli(click.Group):
    """Errors end as one line, ``Error: ...``, without click's usage block: exit status 2 for bad
    usage, 1 for anything else; Ctrl-C prints ``Aborted!`` and exits with 130, SIGTERM prints
    ``Terminated`` and exits with 143 (128 + 15), both after removing what the run had half made. Every
    command checks first that this machine has what it needs (cli/doctor.py, :class:`PreflightCommand`)."""

    command_class = PreflightCommand

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            with _sigterm_like_ctrl_c():
                result = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as exc:
            hint = " (see --help)" if isinstance(exc, click.UsageError) else ""
            click.echo(f"Error: {short_message(exc.format_message())}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(130)
        except Terminated:
            click.echo("Terminated", err=True)
            sys.exit(128 + signal.SIGTERM)
        sys.exit(result if isinstance(result, int) else 0)

def _check_scheduler(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--scheduler`` (else $DASK_SCHEDULER_ADDRESS) is an address, checked while the options are read."""
    from simulation.config import ConfigError
    from simulation.sweep import scheduler_address

    try:
        scheduler_address(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return value


def scheduler_option(func):
    """``--scheduler tcp://HOST:PORT``: train missing runs on that Dask cluster (docs/how-to/sweeps.md)."""
    return click.option("--scheduler", default=None, metavar="tcp://HOST:PORT", callback=_check_scheduler,
                        help="Train missing runs (and, for render/all/slides/page, render every scene) on this "
                             "running `dask scheduler` (default: $DASK_SCHEDULER_ADDRESS, else this machine; "
                             "docs/how-to/cluster.md).")(func)

class PathType(click.Path):
    """click.Path that refuses a NUL character with a message (the OS would raise ValueError; a TOML
    [render] output can hold one, a command line cannot)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and "\x00" in value:
            self.fail("a file or folder name cannot contain a NUL character", param, ctx)
        return super().convert(value, param, ctx)


class TracePathType(PathType):
    """A trace file (``--trace``, ``--twin``, ``inspect FILE``). A run's parts folder (``run.npz.parts/``, all that a
    watched run killed before its ``close`` leaves) is answered with the path to give: the run as far as it got."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value).rstrip("/\\") if isinstance(value, (str, Path)) else ""
        if text.endswith(".parts") and Path(text).is_dir():
            self.fail(f"{value!r} is the parts folder of a watched run (killed, or still recording): give the trace "
                      f"{text[:-len('.parts')]!r}, read as far as the run got", param, ctx)
        return super().convert(value, param, ctx)


# TOML [render] keys -> the names of the click parameters they give defaults to.
RENDER_PARAMS = {"quality": "quality", "lang": "lang", "theme": "theme", "format": "fmt",
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
    file_defaults = {RENDER_PARAMS[k]: v for k, v in data.get("render", {}).items()
                     if RENDER_PARAMS[k] in own and fits(own[RENDER_PARAMS[k]], v)}
    ctx.default_map = {**(ctx.default_map or {}), **file_defaults}
    return value


def model_option(func):
    """``--model SPEC``: a user's own network, trained as experiment ``model`` (runs residual and plain)."""
    return click.option("--model", default=None, metavar="FILE.py:FACTORY",
                        help="Your own network: FILE.py:FACTORY or PACKAGE.MODULE:FACTORY (torchvision.models:resnet18); "
                             "factory arguments with --set model.NAME=VALUE, data with --set data=...")(func)


def trace_option(func):
    """``--trace FILE`` and ``--twin FILE``: runs recorded elsewhere (residual_lecture.watch), drawn in place of
    training (the parameters ``trace`` and ``twin`` of experiment ``model``; simulation/kinds/recorded.py)."""
    func = click.option("--twin", type=TracePathType(), default=None, metavar="FILE",
                        help="With --trace: the trace of its plain twin (residual_lecture.plain_twin), recorded alike; "
                             "the scenes that compare the two need it.")(func)
    return click.option("--trace", type=TracePathType(), default=None, metavar="FILE",
                        help="Draw a run recorded in your own training loop (residual_lecture.watch) or by "
                             "`render.py train --model`: nothing is trained.")(func)


def recorded(ctx: click.Context) -> bool:
    """Whether the command draws runs read from trace files (--trace, --twin)."""
    return bool(ctx.params.get("trace") or ctx.params.get("twin"))


def text_option(func):
    """``--text Scene.key=TEXT``: your own words for one string in this render (repeatable)."""
    return click.option("--text", "texts", multiple=True, metavar="SCENE.KEY=TEXT",
                        help="Your own words for one string, in the language rendered (IdentityHighway.title=...; "
                             "keys: locale/lecture.pot). Repeatable; wins over [text.SCENE] in --config.")(func)


def param_options(func):
    func = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                        help="Set a parameter: name (every experiment that has it), experiment.name or "
                             "Scene.name. Repeatable; wins over --config.")(func)
    func = click.option("--config", "config_file", type=PathType(dir_okay=False), default=None, is_eager=True,
                        callback=_read_config, expose_value=True,
                        help="TOML file with [render], [params], [experiments.NAME], [scenes.NAME] and [text.SCENE] "
                             "tables.")(func)
    return func

class LangChoice(click.Choice):
    """``--lang``: one of :data:`LANGS`; a language code without a catalog is told how to start one (a new user
    typed ``--lang de`` and read only the list of the languages that have one)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            if isinstance(value, str) and re.fullmatch(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]+)?", value):
                exc.message += (f" locale/ has no catalog for {value!r}: start one with "
                                f"`render.py i18n init {value}`.")
            raise


def scene_options(func):
    """What decides how a scene looks, shared by every command that renders scenes (render, all, slides):
    --set/--config, --quality, --lang and --theme."""
    func = param_options(func)
    func = text_option(func)
    func = click.option("--theme", type=click.Choice(THEMES), default=RENDER_DEFAULTS["theme"], show_default=True,
                        help="dark, or light for projectors in bright halls (scenes/kit/theme.py).")(func)
    func = click.option("--lang", type=LangChoice(LANGS), default=RENDER_DEFAULTS["lang"], show_default=True,
                        help="The language of the words on screen, the subtitles and the notes: a catalog under "
                             "locale/ (`render.py i18n init de` starts one), or en-XA, the pseudo-locale.")(func)
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


def voice_option(func):
    """``--voice [NAME]``, shared by every command that renders (render, all, slides)."""
    return click.option("--voice", default=None, metavar="NAME", is_flag=False, flag_value="auto",
                        callback=_voice_not_a_scene, help="Speak the narration with an offline voice (`render.py list` names them: en-piper, "
                             "zh-espeak); a bare --voice picks the language's own. Off by default.")(func)


def render_options(func, formats: tuple[str, ...] = FORMATS, default_format: str = RENDER_DEFAULTS["format"],
                    format_help: str = "png = a still of the last frame.", transparent: bool = True):
    """The options every rendering command takes (``slides`` and ``page`` too, with their own --format, and without
    --transparent: ``transparent=False``, for commands that play opaque mp4 clips whatever it says)."""
    func = trace_option(func)
    func = voice_option(func)
    func = scheduler_option(func)
    func = click.option("--check", is_flag=True,
                        help="Check every input and say what would be trained and rendered; write nothing.")(func)
    func = click.option("--jobs", "-j", type=click.IntRange(min=1), default=RENDER_DEFAULTS["jobs"],
                        help="Scenes rendered at once, each in its own process. " + describe_cap())(func)
    func = click.option("--output", "-o", type=PathType(file_okay=False), default=RENDER_DEFAULTS["output"],
                        show_default=True, help="Folder for the files; they land in OUTPUT/<480p15>/<lang>/.")(func)
    if transparent:
        func = click.option("--transparent/--opaque", default=RENDER_DEFAULTS["transparent"],
                            help="Transparent background (webm, gif, png).")(func)
    func = click.option("--format", "fmt", type=click.Choice(formats), default=default_format,
                        show_default=True, help=format_help)(func)
    return scene_options(func)


def resolved_options(ctx: click.Context) -> dict[str, Any]:
    """The render options as click resolved them (default < the --config file's default_map < command
    line), keyed like RENDER_DEFAULTS; ``concat`` as the file set it for a command without --concat."""
    file_render = (ctx.meta.get("config_data") or {}).get("render", {})
    out = {key: ctx.params[param] for key, param in RENDER_PARAMS.items() if param in ctx.params}
    out.setdefault("concat", file_render.get("concat", RENDER_DEFAULTS["concat"]))
    return out

def voices() -> dict[str, dict[str, Any]]:
    from narration import VOICES, missing_voice

    return {name: {"lang": e.lang, "description": e.description, "licence": e.licence,
                   "missing": missing_voice(name)} for name, e in VOICES.items()}

def _show(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def echo_params(params: dict[str, dict[str, Any]], explain: bool = False) -> None:
    """One wrapped line of ``key=value (type[, default D])`` per parameter; ``explain``: with where each value comes
    from (``from --set``, ``from lecture.toml``, ``from default``: cli.params.experiment_sources)."""
    parts = []
    for key, p in params.items():
        changed = p["value"] != p["default"] and _show(p["value"]) != _show(p["default"])
        note = f"{p['type']}, default {_show(p['default'])}" if changed else p["type"]
        if explain:
            note += f", from {p.get('source', 'default')}"
        parts.append(f"{key}={_show(p['value'])} ({note})")
    line = ""
    for part in parts:  # wrap between parameters, never inside one
        if line and len(line) + 2 + len(part) > 100:
            click.echo(f"  {'':<24} {line}")
            line = ""
        line = f"{line}  {part}" if line else part
    if line:
        click.echo(f"  {'':<24} {line}")

def figure(value: float | None, spec: str) -> str:
    """A summary figure for the terminal; None (NaN or inf in the trace, e.g. after divergence) as 'n/a'."""
    return "n/a" if value is None else format(value, spec)

def diverged_where(layer: int | None) -> str:
    """Where a run diverged, blocks counted from 1 as the scenes count them (``layer`` is 0-based; -1 or
    None: the stem, the head or the loss)."""
    return f"block {layer + 1}" if layer is not None and layer >= 0 else "stem, head or loss"


def _echo_row(name: str, text: str) -> None:
    """``name`` in a column of 24 and ``text`` beside it; a longer name gets a line of its own."""
    click.echo(f"  {name:<24} {text}" if len(name) < 24 else f"  {name}\n  {'':<24} {text}")


def echo_listing(listing: dict[str, Any], explain: bool = False) -> None:
    """``render.py list`` for a person: scenes, experiments and voices of :func:`cli.plan.lecture_listing`
    (plus ``listing["voices"]``: :func:`voices`); ``explain``: each parameter's source too."""
    click.echo("Scenes, in lecture order (render.py render NAME; --set NAME.param=value):")
    for scene in listing["scenes"]:
        _echo_row(scene["name"], scene["description"])
        click.echo(f"  {'':<24} experiment: {scene['experiment'] or '-'}"
                   + (f"; optional chapter {scene['chapter']!r} (render.py all --chapter {scene['chapter']})"
                      if scene.get("chapter") else ""))
        if scene["params"]:
            echo_params(scene["params"], explain)
    click.echo("\nScenes of your own network (experiment model; render.py render NAME --model FILE.py:FACTORY):")
    for scene in listing.get("model_scenes", []):
        _echo_row(scene["name"], scene["description"])
        click.echo(f"  {'':<24} with --model, {scene['variant_of']} draws this")
    click.echo("\nExperiments (--set param=value for every experiment, --set NAME.param=value for one):")
    for name, exp in listing["experiments"].items():
        _echo_row(name, exp["description"])
        click.echo(f"  {'':<24} source: {exp['source']}")
        echo_params(exp["params"], explain)
    click.echo("\nLanguages (--lang LANG; a string not translated yet is shown in English; render.py i18n):")
    for lang, info in listing.get("languages", {}).items():
        _echo_row(lang, f"{info['name']}: {info['translated']}/{info['total']} strings translated; "
                        f"font {info['font']}; voice {info['voice'] or '-'}")
    click.echo("\nVoices (--voice NAME; a bare --voice picks the language's own):")
    for name, v in listing["voices"].items():
        _echo_row(name, f"{v['lang']}: {v['description']}")
        click.echo(f"  {'':<24} licence: {v['licence']}")
        click.echo(f"  {'':<24} {'installed' if not v['missing'] else 'missing: ' + v['missing']}")


def train_summary(experiment: str, runs: dict[Any, Any], traces: list[Any]) -> dict[str, Any]:
    """``render.py train``'s summary (its ``--json`` output, docs/how-to/sweeps.md) of ``runs`` (``{RunKey: config}``) and
    their ``traces`` in that order: ``{"experiment", "runs": {run key text: {"trace": path, **summary}}, "seeds":
    simulation.seeds.summarize_seeds(...)}`` (run key texts: :func:`simulation.runkeys.key_texts`)."""
    from simulation.cache import trace_path
    from simulation.runkeys import key_texts
    from simulation.seeds import summarize_seeds
    from simulation.summary import summarize

    summaries = {key: summarize(trace) for key, trace in zip(runs, traces)}
    texts = key_texts(runs)
    return {"experiment": experiment,
            "runs": {texts[key]: {"trace": str(trace_path(runs[key])), **s.to_dict()} for key, s in summaries.items()},
            "seeds": summarize_seeds(summaries)}


def echo_run_summaries(summary: dict[str, dict[str, Any]]) -> None:
    """One line per run of ``render.py train``: ``{run name: simulation.summary.summarize(...).to_dict()}``."""
    from simulation.summary import loss_blew_up

    for name, s in summary.items():
        status = f"diverged at step {s['diverged_step']}, {diverged_where(s['diverged_layer'])}" if s["diverged"] else "finite"
        if loss_blew_up(s):  # finite, yet far above where it started
            status += (f", but its loss grew from {figure(s['initial_loss'], '.3g')} to "
                       f"{figure(s['final_train_loss_avg'], '.3g')}: it did not train (a smaller lr?)")
        # the figures this kind records (simulation.summary.summarize): per-block gradients, or the composite gain
        grad = f"first/last grad_norm at step 0 {figure(s['grad_ratio_step0'], '.3g')}  " if s["grad_norm_step0"] else ""
        gain = (f"composite gain {figure(s['composite_row_gain_final'], '.4g')}  "
                if "composite_row_gain_final" in s else "")
        click.echo(f"{name:<24} loss {figure(s['final_loss'], '.4g')}  error {figure(s['final_error'], '.3f')}  "
                   f"test error {figure(s['final_test_error'], '.3f')}  {grad}{gain}{status}")
