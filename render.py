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

from cli import quiet_ctrl_c  # first: Ctrl-C while the modules below load ends quietly (status 130)
quiet_ctrl_c(__name__)
import functools
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from cli.doctor import doctor_command
from cli.i18n import i18n_command, try_own_words
from cli.options import (LectureCli, PathType, Terminated, echo_listing, echo_run_summaries, model_option, note,
                         param_options, render_options, report, resolved_options, scheduler_option, setup_logging,
                         recorded, trace_option, train_summary, TracePathType, user_errors, voices)
from cli.params import DECK_FORMATS, QUALITIES, RENDER_DEFAULTS, ParameterInputs, experiment_runs
from cli.plan import (CHAPTER_HELP, lecture_listing, lecture_with, model_experiment, model_scenes, plan_render,
                      recorded_scenes, refuse_untrainable, resolve_scenes, scenes_or_lecture, traces_note)
from simulation.config import ConfigError

__all__ = ["cli"]


@click.group(cls=LectureCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Show Manim's own log too, and list every file written.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Explain residual connections with animations driven by real, recorded training runs."""
    setup_logging(verbose)
    ctx.obj = {"verbose": verbose, "started": time.monotonic()}


def _inputs(ctx: click.Context, sets: tuple[str, ...], scene_names: list[str] | None) -> ParameterInputs:
    """This command's --config file, --model, --trace and --set, for the cli/ function that layers them (cli/params.py)."""
    return ParameterInputs(ctx.meta.get("config_data"), ctx.params["config_file"], tuple(sets), scene_names,
                           tuple(ctx.params.get("texts", ())), **{k: ctx.params.get(k) for k in ("model", "trace", "twin")})


# -- list, train, inspect ---------------------------------------------------------------------

@cli.command("list")
@param_options
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable listing.")
@click.option("--explain", is_flag=True, help="Say where each value comes from: default, the --config file or --set.")
@click.pass_context
def list_command(ctx: click.Context, config_file: str | None, sets: tuple[str, ...], as_json: bool, explain: bool) -> None:
    """Scenes (in lecture order) and experiments, with every parameter's type, default, value and (--explain) source."""
    import scenes

    with user_errors():
        by_name = {s.__name__: s for s in scenes.ALL_SCENES}  # the lecture's, then those of your own network
        listing = lecture_listing(_inputs(ctx, sets, list(by_name)), by_name)
    listing["voices"] = voices()
    if as_json:
        click.echo(json.dumps(listing, indent=2, default=list))
    else:
        echo_listing(listing, explain)


@cli.command()
@click.argument("experiment", required=False)
@param_options
@model_option
@click.option("--seed", type=int, default=None, help="Seed of every run (same as --set seed=N).")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@scheduler_option
@click.pass_context
def train(ctx: click.Context, experiment: str | None, config_file: str | None, sets: tuple[str, ...],
          model: str | None, seed: int | None, as_json: bool, scheduler: str | None) -> None:
    """Train the runs of EXPERIMENT (or load them from the cache) and print a summary.

    With --model FILE.py:FACTORY (EXPERIMENT may be left out): your own network and its plain twin."""
    from cli.media import check_cache_dir
    from simulation.cache import get_traces, is_cached, trace_path
    from simulation.experiments import get_experiment

    with user_errors():
        experiment = model_experiment(experiment, model)
        params = {experiment: list(get_experiment(experiment).params())}
        runs = experiment_runs(_inputs(ctx, sets, None), params, seed=seed)[experiment]
        refuse_untrainable({experiment: runs})
        check_cache_dir()
        fresh = [cfg for cfg in runs.values() if not is_cached(cfg)]
        traces = get_traces(list(runs.values()), scheduler=scheduler)
    summary = train_summary(experiment, runs, traces)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        echo_run_summaries(summary["runs"])
    if experiment == "model" and not as_json:
        names = traces[0].meta.layers or []
        click.echo(f"{len(names)} residual additions (blocks), in forward order: {', '.join(names)}")
    note(traces_note(fresh, len(runs)))
    if not as_json:
        report([trace_path(cfg) for cfg in fresh], [trace_path(c) for c in runs.values() if c not in fresh],
                "from the cache (not trained again):", opens=("trace",))


@cli.command()
@click.argument("trace_file", type=TracePathType())
def inspect(trace_file: str) -> None:
    """Print a trace's metadata, array shapes and summary as JSON (a watched run: what it recorded, in "watch")."""
    from simulation.summary import inspect_trace

    with user_errors():
        payload = inspect_trace(trace_file)
    click.echo(json.dumps(payload, indent=2))


# -- render -----------------------------------------------------------------------------------

@cli.command()
@click.argument("scene_names", nargs=-1, required=True, metavar="SCENE...")
@render_options
@model_option
@click.pass_context
def render(ctx: click.Context, scene_names: tuple[str, ...], **_: Any) -> None:
    """Render SCENE... (names from `render.py list`, or module:Class for a scene of your own).

    With --model FILE.py:FACTORY: drawn from your own network and its plain twin; with --trace FILE [--twin FILE]:
    from a run recorded in your own loop (residual_lecture.watch)."""
    with user_errors():
        scenes = resolve_scenes(scene_names)
        if ctx.params.get("model") or recorded(ctx):
            scenes = model_scenes(scenes)
    _render(ctx, scenes, concat_allowed=False)


@cli.command("all")
@render_options
@click.option("--concat/--no-concat", default=False, help="Also join the scenes into one lecture video.")
@click.option("--chapter", "chapters", multiple=True, metavar="NAME", help=CHAPTER_HELP)
@click.pass_context
def all_command(ctx: click.Context, chapters: tuple[str, ...] = (), **_: Any) -> None:
    """Render the whole lecture in order (chapters with --chapter; with --trace: every scene that can draw it)."""
    with user_errors():  # an unknown chapter: one line, nothing rendered
        scenes = (recorded_scenes((), _inputs(ctx, ctx.params["sets"], None), chapters, say=note) if recorded(ctx)
                  else lecture_with(chapters))
    _render(ctx, scenes, concat_allowed=not recorded(ctx))


def _render(ctx: click.Context, scenes: list[type], concat_allowed: bool, video_only: bool = False,
            report_files: bool = True) -> tuple[list, list[Path], list[Path]] | None:
    """Render ``scenes`` with the context's options (cli/plan.py plans; your own words tried first); returns (jobs,
    written, unchanged), None after --check. ``video_only``: mp4, opaque, whatever --format says (decks, page)."""
    import scenes as lecture
    from cli.media import RenderError, concat_lecture, render_job
    from cli.pipeline import render_pipeline, train_before_render

    with user_errors():
        names = dict.fromkeys(s.__name__ for s in [*lecture.ALL_SCENES, *scenes])
        layers = _inputs(ctx, ctx.params["sets"], list(names))
        options = resolved_options(ctx)
        if video_only:
            options.update({"format": "mp4", "transparent": False, "concat": False})
        plan = plan_render(scenes, layers, options, verbose=ctx.obj["verbose"] if ctx.obj else False,
                           concat_allowed=concat_allowed, scheduler=ctx.params.get("scheduler"))
        if ctx.params.get("check"):
            click.echo(f"check: the input is valid; {plan.summary()}")
            return None
        try_own_words(plan, note)
        if plan.configs:
            note(f"traces: {plan.traces_summary()}")
        note(f"scenes: {len(plan.todo)} to render, {len(plan.jobs) - len(plan.todo)} up to date")
        # Train in lecture order and render each scene as soon as its traces are cached; then join.
        written, unchanged = [], list(plan.unchanged)
        try:
            if plan.pipelined:
                stop = lambda: signal.SIGTERM if isinstance(sys.exc_info()[1], Terminated) else signal.SIGINT
                done, failures = render_pipeline(plan.todo, plan.fresh, plan.scheduler if plan.cluster else None,
                                                 plan.n_jobs, options["quality"], options["jobs"] is not None,
                                                 note, stop)
                written += done
                if failures:
                    raise RenderError(f"{len(failures)} of {len(plan.todo)} scenes failed: " + "; ".join(failures))
            else:
                if plan.fresh:
                    train_before_render(plan.fresh, plan.scheduler, options["quality"])
                for index, job in enumerate(plan.todo, 1):
                    note(f"rendering {job.scene} ({index}/{len(plan.todo)})")
                    written += render_job(job, plan.by_name[job.scene], progress=sys.stderr.isatty())
            if options["concat"]:
                files, wrote = concat_lecture(plan.jobs)
                (written if wrote else unchanged).extend(files)
        except (RenderError, ConfigError):
            report(written, unchanged)
            raise
    if report_files:
        report(written, unchanged)
    return plan.jobs, written, unchanged


# -- slides and the page ----------------------------------------------------------------------

def _render_clips(ctx: click.Context, scene_names: tuple[str, ...]):
    """Render what is missing of SCENE... (default: the lecture) as web-ready mp4 for a deck or the page;
    (jobs, clips, written, unchanged), or None after --check."""
    from cli.deck import load_clip
    from cli.media import scene_title

    with user_errors():
        scenes = (recorded_scenes(scene_names, _inputs(ctx, ctx.params["sets"], None), say=note) if recorded(ctx)
                  else scenes_or_lecture(scene_names))
    rendered = _render(ctx, scenes, concat_allowed=False, video_only=True, report_files=False)
    if rendered is None:
        return None
    jobs, written, unchanged = rendered
    with user_errors():
        titles = {s.__name__: scene_title(s) for s in scenes}  # the page and the deck show what the scene shows
        clips = [load_clip(job.primary, titles.get(job.scene)) for job in jobs]
    return jobs, clips, written, unchanged


@cli.command()
@click.argument("scene_names", nargs=-1, metavar="[SCENE...]")
@functools.partial(render_options, formats=DECK_FORMATS, default_format="html", transparent=False,
                   format_help="html: reveal.js deck (offline); pptx: slides with video and notes; pdf: handout.")
@click.pass_context
def slides(ctx: click.Context, scene_names: tuple[str, ...], **_: Any) -> None:
    """A deck with one slide per beat (narration point) of SCENE... (default: the whole lecture, in order).

    Renders what is missing first (mp4), then writes OUTPUT/<480p15>/<lang>/slides/index.html (html),
    slides.pptx or slides.pdf. Keys in the html deck: -> / space next, <- back, S speaker notes, F full screen."""
    from cli.deck import write_deck

    rendered = _render_clips(ctx, scene_names)
    if rendered is None:  # --check: nothing is written
        return
    jobs, clips, written, unchanged = rendered
    with user_errors():
        written += write_deck(clips, jobs[0].final_dir, jobs[0].lang, ctx.params["fmt"],
                              light=ctx.params.get("theme") == "light")
    report(written, unchanged, opens=("deck",))


@cli.command()
@click.argument("scene_names", nargs=-1, metavar="[SCENE...]")
@functools.partial(render_options, formats=("html",), default_format="html", format_help="HTML.", transparent=False)
@click.pass_context
def page(ctx: click.Context, scene_names: tuple[str, ...], **_: Any) -> None:
    """One web page with every clip of SCENE... (default: the whole lecture) in order: chapters, subtitles in
    English, Chinese and the --lang rendered, the numbers each clip showed, its parameters and trace summaries.

    Writes OUTPUT/<480p15>/<lang>/page/lecture.html and its files; copy the page/ folder to publish it. The page
    links to the explorer at OUTPUT/explore if one is there (`render.py explore -o OUTPUT/explore` first)."""
    from cli.page import write_page

    rendered = _render_clips(ctx, scene_names)
    if rendered is None:  # --check: nothing is written
        return
    jobs, clips, written, unchanged = rendered
    with user_errors():
        written += write_page(clips, jobs[0].final_dir / "page", jobs[0].lang,
                              light=ctx.params.get("theme") == "light",
                              explorer=Path(ctx.params["output"]) / "explore" / "index.html")
    report(written, unchanged, opens=("page",))


@cli.command()
@click.argument("experiments", nargs=-1, metavar="[EXPERIMENT...]")
@param_options
@click.option("-o", "--output", type=PathType(file_okay=False), default="media/explore", show_default=True,
              help="The explorer's folder (written whole, or not at all).")
@click.option("--quality", type=click.Choice(tuple(QUALITIES)), default=RENDER_DEFAULTS["quality"], show_default=True,
              help="Each view links to its clip on the lecture page of this quality (render.py page -o OUTPUT/..).")
@model_option
@trace_option
@scheduler_option
@click.pass_context
def explore(ctx: click.Context, experiments: tuple[str, ...], config_file: str | None, sets: tuple[str, ...],
            output: str, quality: str, model: str | None, scheduler: str | None, **_: Any) -> None:
    """An offline page where students drive the recorded runs of EXPERIMENT... (default: the lecture's; cli/explore.py).

    With --model FILE.py:FACTORY (or --trace FILE [--twin FILE], recorded in your own loop): your own network and
    its plain twin too (alone when no EXPERIMENT is named). Trains what is missing, like `train`; writes
    OUTPUT/index.html and its files, which open from file://."""
    from cli.explore import explored_experiments, lecture_params, page_link, write_explorer
    from cli.media import check_cache_dir, check_output_dir
    from simulation.cache import get_traces
    from simulation.experiments import get_experiment

    with user_errors():
        params = {name: list(get_experiment(name).params())
                  for name in explored_experiments(experiments, model or recorded(ctx))}
        runs = experiment_runs(_inputs(ctx, sets, None), params, {name: lecture_params(name) for name in params},
                               validate=False)
        refuse_untrainable(runs)
        check_cache_dir()
        check_output_dir(Path(output), "explorer folder", videos=False)  # before any training
        traces = iter(get_traces([c for r in runs.values() for c in r.values()], scheduler=scheduler))
        target = Path(output)
        written = write_explorer({name: {run: next(traces) for run in r} for name, r in runs.items()}, target,
                                 page=page_link(target, target.parent, quality))
    report(written, opens=("page",))


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
    from cli.params import Layer, scene_overrides, scene_runs
    from cli.pipeline import DIE_WITH_PARENT, die_with_parent
    from cli.plan import run_digests

    if os.environ.get(DIE_WITH_PARENT):
        die_with_parent()
    with user_errors():
        job = RenderJob.from_json(job_json)
        scene = load_scene(job.module, job.scene)
        job.params, runs = scene_runs(getattr(scene, "experiment", None), getattr(scene, "experiment_defaults", {}),
                                      job.params)  # the job's JSON values, typed again before simulation/ sees them
        if run_digests(runs) != job.traces:
            raise RenderError(f"{job.scene}: this machine's simulation code gives other trace digests than "
                              "the client's (start the workers from a checkout of the same commit)")
        job.attrs = scene_overrides([Layer("the render job", scenes={job.scene: job.attrs})], scene)  # checked again
        files = render_job(job, scene)
    click.echo(json.dumps({"files": [str(p) for p in files]}))


cli.add_command(i18n_command)  # the catalogs of the lecture's words (cli/i18n.py)
cli.add_command(doctor_command)  # what this machine has of what the lecture needs (cli/doctor.py)
if __name__ == "__main__":
    cli()
