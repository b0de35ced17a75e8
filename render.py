"""The command line: train real networks, render the lecture's scenes from their traces.

Example::

    python render.py list
    python render.py render IdentityHighway ChainRuleProduct --quality l
    python render.py all --lang zh
    python render.py train vanishing --set depths=8,20 --json
    python render.py inspect .cache/traces/<digest>.npz
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["cli"]

QUALITIES = {"l": "low_quality", "m": "medium_quality", "h": "high_quality", "k": "fourk_quality"}
log = logging.getLogger("render")


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")
    for name in ("simulation", "render"):
        logging.getLogger(name).setLevel(logging.INFO)


def _parse_sets(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint="--set")
        out[key.strip()] = value.strip()
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Show Manim's own log too.")
def cli(verbose: bool) -> None:
    """Explain residual connections with animations driven by real, recorded training runs."""
    _setup_logging(verbose)


@cli.command("list")
def list_command() -> None:
    """Scenes (in lecture order) and experiments with their parameters."""
    from scenes import SCENES_IN_ORDER
    from simulation.experiments import EXPERIMENTS

    click.echo("Scenes, in lecture order:")
    for scene in SCENES_IN_ORDER:
        doc = (scene.__doc__ or "").strip().splitlines()[0]
        click.echo(f"  {scene.__name__:<24} {doc}  [experiment: {scene.experiment or '-'}]")
    click.echo("\nExperiments (set any parameter with --set key=value):")
    for exp in EXPERIMENTS.values():
        click.echo(f"  {exp.name:<18} {exp.description}")
        click.echo(f"  {'':<18} source: {exp.source}")
        params = ", ".join(f"{k}={_show(v)} ({t})" for k, (v, t) in exp.params().items())
        click.echo(f"  {'':<18} parameters: {params}")


def _show(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


@cli.command()
@click.argument("experiment")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a parameter (repeatable).")
@click.option("--seed", type=int, default=None, help="Seed of every run (same as --set seed=N).")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def train(experiment: str, sets: tuple[str, ...], seed: int | None, as_json: bool) -> None:
    """Train the runs of EXPERIMENT (or load them from the cache) and print a summary."""
    from simulation.cache import get_traces, trace_path
    from simulation.config import ConfigError
    from simulation.experiments import build_runs
    from simulation.summary import summarize

    overrides = _parse_sets(sets)
    if seed is not None:
        overrides["seed"] = str(seed)
    try:
        runs = build_runs(experiment, overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    traces = get_traces(list(runs.values()))
    summary = {name: {"trace": str(trace_path(cfg)), **summarize(t)} for (name, cfg), t in zip(runs.items(), traces)}
    if as_json:
        click.echo(json.dumps({"experiment": experiment, "runs": summary}, indent=2))
        return
    for name, s in summary.items():
        status = f"diverged at step {s['diverged_step']}, block {s['diverged_layer']}" if s["diverged"] else "finite"
        click.echo(f"{name:<24} loss {s['final_loss']:.4g}  error {s['final_error']:.3f}  "
                   f"test error {s['final_test_error']:.3f}  first/last grad_norm at step 0 "
                   f"{s['grad_ratio_step0']:.3g}  {status}")
    click.echo("\nwrote:" if traces else "")
    for s in summary.values():
        click.echo(f"  {s['trace']}")


@cli.command()
@click.argument("trace_file", type=click.Path(dir_okay=False))
def inspect(trace_file: str) -> None:
    """Print a trace's metadata and summary."""
    from simulation.summary import summarize
    from simulation.trace import Trace, TraceError

    try:
        trace = Trace.load(trace_file)
    except TraceError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps({"meta": trace.meta, "arrays": {k: list(v.shape) for k, v in trace.arrays.items()},
                           "summary": summarize(trace)}, indent=2))


def _render_options(func):
    func = click.option("--quality", "-q", type=click.Choice(list(QUALITIES)), default="l", show_default=True,
                        help="l=480p15, m=720p30, h=1080p60, k=2160p60.")(func)
    func = click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)(func)
    func = click.option("--output", "-o", type=click.Path(file_okay=False), default="media", show_default=True,
                        help="Folder for videos, subtitles and numbers JSON.")(func)
    func = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                        help="Override a parameter of the scenes' experiments (repeatable).")(func)
    return func


@cli.command()
@click.argument("scene_names", nargs=-1, required=True)
@_render_options
def render(scene_names: tuple[str, ...], quality: str, lang: str, output: str, sets: tuple[str, ...]) -> None:
    """Render SCENE... (names from `render.py list`)."""
    from scenes import get_scene

    try:
        scenes = [get_scene(name) for name in scene_names]
    except KeyError as exc:
        raise click.ClickException(exc.args[0]) from None
    _render_scenes(scenes, quality, lang, Path(output), _parse_sets(sets))


@cli.command("all")
@_render_options
def all_command(quality: str, lang: str, output: str, sets: tuple[str, ...]) -> None:
    """Render the whole lecture in order."""
    from scenes import SCENES_IN_ORDER

    _render_scenes(list(SCENES_IN_ORDER), quality, lang, Path(output), _parse_sets(sets))


def _render_scenes(scenes: list, quality: str, lang: str, output: Path, overrides: dict[str, str]) -> None:
    from manim import tempconfig

    from simulation.cache import get_traces
    from simulation.config import ConfigError
    from simulation.experiments import build_runs

    # Validate everything and train what is missing before the first frame is drawn.
    try:
        for scene in scenes:
            if scene.experiment:
                get_traces(list(build_runs(scene.experiment, overrides).values()))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    written: list[Path] = []
    for scene in scenes:
        variant = type(scene.__name__, (scene,), {"lang": lang, "params": overrides})
        settings = {"quality": QUALITIES[quality], "media_dir": str(output), "verbosity": "WARNING",
                    "progress_bar": "none" if not sys.stderr.isatty() else "display"}
        with tempconfig(settings):
            instance = variant()
            instance.render()
            movie = Path(instance.renderer.file_writer.movie_file_path)
        written += [p for p in (movie, movie.with_suffix(".srt"), movie.with_suffix(".numbers.json")) if p.exists()]
    click.echo("wrote:")
    for path in written:
        click.echo(f"  {path}")


if __name__ == "__main__":
    cli()
