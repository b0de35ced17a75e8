"""The render planner: from scenes, parameter layers and options to jobs, runs to train and where (no click).

Example::

    plan = plan_render(scenes, layers, {**RENDER_DEFAULTS, "quality": "l"})
    print(len(plan.todo), "scenes to render,", len(plan.fresh), "runs to train")

Every input is checked before any work: parameter keys and values, the render options, the tools Manim needs,
the voice, the output folder, the trace cache and every run's memory. Nothing is trained or rendered here:
:func:`plan_render` only reads (the cache, the files already rendered). render.py runs the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from cli.params import Layer, ParameterInputs, all_params, as_layers, merged_texts, refuse_unused_sets, validate_scoped
from narration import i18n
from simulation.config import ConfigError, read_from

__all__ = ["RenderPlan", "plan_render", "scene_texts", "language_listing", "resolve_scenes", "scenes_or_lecture",
           "lecture_listing", "model_experiment", "model_scenes", "undrawable", "refuse_untrainable",
           "drawable_scenes", "recorded_scenes",
           "run_digests", "lecture_with", "CHAPTER_HELP", "read_from_files", "traces_note"]


def read_from_files(configs: Iterable[Any]) -> list[Any]:
    """Those of ``configs`` read from trace files (--trace, --twin, ``model.trace``), not trained."""
    from simulation.config import RecordedConfig

    return [c for c in configs if isinstance(c, RecordedConfig)]


def traces_note(fresh: list[Any], total: int) -> str:
    """``render.py train``'s last line: "traces: 1 trained, 2 from the cache" (", 1 read from its file" for runs
    read from trace files, which nothing trains)."""
    read = len(read_from_files(fresh))
    return (f"traces: {len(fresh) - read} trained, {total - len(fresh)} from the cache"
            + (f", {read} {read_from(read)}" if read else ""))


def model_experiment(experiment: str | None, model: str | None) -> str:
    """The experiment ``train`` runs: EXPERIMENT, or ``model`` with --model (EXPERIMENT left out or "model")."""
    if model is None:
        if experiment is None:
            raise ConfigError("name an experiment (render.py list) or give --model FILE.py:FACTORY")
        return experiment
    if experiment not in (None, "model"):
        raise ConfigError(f"--model trains your own network (experiment model), not experiment {experiment!r}: "
                          "leave the experiment out")
    return "model"


def refuse_untrainable(runs: dict[str, dict[Any, Any]]) -> None:
    """ConfigError (:data:`simulation.config.NO_MODEL`) where experiment ``model`` is to run without a model:
    neither --model (a spec to train) nor --trace (a file to read)."""
    from simulation.config import NO_MODEL

    if "model" in runs and not all(getattr(c, "spec", None) or getattr(c, "path", None) for c in runs["model"].values()):
        raise ConfigError(NO_MODEL)


def model_scenes(scenes: list[type]) -> list[type]:
    """Each scene's variant that draws a user's model (experiment ``model``; scenes.model_variant)."""
    import scenes as scene_package

    variant = getattr(scene_package, "model_variant", None)
    if variant is None:
        raise ConfigError("no scene draws your own network in this version; `render.py train --model` trains it")
    try:
        return [variant(scene) for scene in scenes]
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None


def undrawable(scene: type, runs: dict[Any, Any]) -> str | None:
    """Why ``scene`` cannot draw ``runs`` (``{RunKey: config}``) where some are read from trace files
    (``--trace``): a run, an array or records it reads that the files lack (its ``needs_runs``, ``required_arrays``
    and ``min_records``);
    None when it can, or when every run is trained here."""
    from simulation.kinds.recorded import missing

    return missing(runs, getattr(scene, "needs_runs", ()), getattr(scene, "required_arrays", ()),
                   getattr(scene, "min_records", 1))


def drawable_scenes(scenes: list[type], layers: list[Layer] | ParameterInputs, say=None) -> list[type]:
    """Those of ``scenes`` (variants drawing experiment ``model``) that can draw its runs under ``layers`` (runs read
    from trace files may lack what a scene draws); each one left out is said through ``say`` (one line). Raises
    ConfigError when none is left."""
    from cli.params import experiment_overrides, scene_runs
    from simulation.experiments import get_experiment

    layers, out, why = as_layers(layers), [], {}
    for scene in scenes:
        experiment = getattr(scene, "experiment", None)
        overrides = experiment_overrides(layers, experiment, list(get_experiment(experiment).params())) if experiment else {}
        _, runs = scene_runs(experiment, getattr(scene, "experiment_defaults", {}), overrides)
        why[scene.__name__] = undrawable(scene, runs)
        if why[scene.__name__] is None:
            out.append(scene)
        elif say is not None:
            say(f"{scene.__name__} left out: {why[scene.__name__]}")
    if not out:
        raise ConfigError("no scene can draw this trace: " + "; ".join(f"{k}: {v}" for k, v in why.items()))
    return out


def recorded_scenes(scene_names: Iterable[str], layers: list[Layer] | ParameterInputs, chapters: Iterable[str] = (), say=None
                    ) -> list[type]:
    """The scenes a command draws with --trace: the variants of SCENE... that draw experiment model, or with no
    SCENE every scene that can draw the trace, in lecture order (:func:`drawable_scenes`; ``say`` names the others).
    Raises ConfigError for --chapter (the lecture's scenes)."""
    import scenes

    if tuple(chapters):
        raise ConfigError("--chapter picks the lecture's scenes; with --trace every scene that can draw the trace is "
                          "rendered: leave --chapter out")
    names = tuple(scene_names)
    return model_scenes(resolve_scenes(names)) if names else drawable_scenes(list(scenes.MODEL_SCENES), layers, say)


def lecture_listing(layers: list[Layer] | ParameterInputs, scenes_by_name: dict[str, type]) -> dict[str, Any]:
    """What ``render.py list`` shows, checked: ``{"scenes": [...], "model_scenes": [...], "experiments": {...},
    "languages": {...}}`` with every parameter's type, default, value under ``layers`` and source (the layer that set
    it, or "default": :func:`cli.params.experiment_sources`) (scenes in the order given; those that draw a user's own
    network, scenes.MODEL_SCENES, under ``model_scenes`` with the lecture scene they vary). Raises ConfigError for a
    bad value."""
    import scenes as scene_package
    from cli.params import (DEFAULT_SOURCE, check_common_keys, experiment_overrides, experiment_sources,
                            experiment_values, scene_overrides, scene_params, scene_sources)
    from simulation.experiments import EXPERIMENTS, build_runs, split_params

    layers = as_layers(layers)
    check_common_keys(layers, all_params(), all_params())
    validate_scoped(layers, scenes_by_name)
    listing: dict[str, Any] = {"scenes": [], "model_scenes": [], "experiments": {}}
    variant_of = {variant: name for name, variant in scene_package.MODEL_VARIANTS.items()}
    for scene in scenes_by_name.values():
        values, sources = scene_overrides(layers, scene), scene_sources(layers, scene)
        entry = {
            "name": scene.__name__, "description": " ".join((scene.__doc__ or "").strip().split("\n\n")[0].split()),
            "experiment": getattr(scene, "experiment", None), "chapter": getattr(scene, "chapter", None),
            "params": {k: {"type": t, "default": d, "value": values.get(k, d), "source": sources.get(k, DEFAULT_SOURCE)}
                       for k, (d, t) in scene_params(scene).items()},
        }
        if scene in scene_package.MODEL_SCENES:
            listing["model_scenes"].append({**entry, "variant_of": variant_of.get(scene, scene.__name__)})
        else:
            listing["scenes"].append(entry)
    for name, exp in EXPERIMENTS.items():
        values = experiment_values(name, experiment_overrides(layers, name, exp.params()))
        build_runs(name, values)
        base, extra = split_params(exp, values)
        sources = experiment_sources(layers, name, exp.params())
        listing["experiments"][name] = {
            "description": exp.description, "source": exp.source,
            "params": {k: {"type": t, "default": d, "value": getattr(base, k, extra.get(k, d)),
                           "source": sources.get(k, DEFAULT_SOURCE)}
                       for k, (d, t) in exp.params().items()},
        }
    listing["languages"] = language_listing()
    return listing


def language_listing() -> dict[str, dict[str, Any]]:
    """``{lang: {"name", "translated", "total", "font", "voice"}}`` of every renderable language (``render.py list``):
    how much of its catalog is translated (the rest falls back to English), its font and its voice (None: silent)."""
    from narration import VOICES

    out = {}
    for lang in i18n.languages():
        done, total = i18n.coverage(lang)
        spoken = next((name for name, engine in VOICES.items() if engine.lang == lang), None)
        out[lang] = {"name": i18n.language(lang).name, "translated": done, "total": total,
                     "font": i18n.language(lang).font, "voice": spoken}
    return out


def run_digests(runs: dict[Any, Any]) -> dict[str, str]:
    """``{RunKey: config}`` -> ``{run key text: config digest}``: the traces a render job reads, as its JSON (and so
    its up-to-date key and the clip's record) holds them (text form: :func:`simulation.runkeys.key_texts`)."""
    from simulation.runkeys import key_texts

    texts = key_texts(runs)
    return {texts[key]: config.digest() for key, config in runs.items()}


def resolve_scenes(names: Iterable[str]) -> list[type]:
    """The scene classes named (from ``scenes.ALL_SCENES``, or ``module:Class`` for one of your own)."""
    import scenes
    from cli.media import load_scene

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


CHAPTER_HELP = ("Also render this optional chapter's scenes, each at its place in the lecture (`render.py list` marks "
                "them; README: Optional chapter: beyond 2016). Repeatable.")


def lecture_with(chapters: Iterable[str]) -> list[type]:
    """The lecture in order with the scenes of the optional ``chapters`` (:data:`scenes.CHAPTERS`) at their
    places. Raises ConfigError (one line) for an unknown chapter."""
    import scenes

    try:
        return scenes.lecture_scenes(tuple(chapters))
    except KeyError as exc:
        raise ConfigError(exc.args[0]) from None


def scenes_or_lecture(names: Iterable[str]) -> list[type]:
    """:func:`resolve_scenes`, or the whole lecture in order when no name is given."""
    import scenes

    names = tuple(names)
    return resolve_scenes(names) if names else scenes.lecture_scenes()


@dataclass
class RenderPlan:
    """What a render command will do; every list in lecture order."""

    jobs: list  # one cli.media.RenderJob per scene
    todo: list  # the jobs whose files are missing or stale
    unchanged: list[Path]  # the files of the other jobs, still current
    configs: list  # the distinct runs the scenes of ``todo`` read
    fresh: list  # those of ``configs`` the cache lacks: to train
    scheduler: str | None  # a Dask scheduler's address, "local" or None (this machine)
    n_jobs: int  # scenes rendered at once
    by_name: dict[str, type] = field(default_factory=dict)  # scene name -> class, for the jobs

    @property
    def cluster(self) -> bool:
        return self.scheduler not in (None, "local")

    @property
    def pipelined(self) -> bool:
        """Train and render at once (on a cluster, or several scenes in several processes)."""
        return self.cluster or (self.n_jobs > 1 and len(self.todo) > 1)

    @property
    def read(self) -> list:
        """Those of ``fresh`` read from trace files (--trace), not trained."""
        return read_from_files(self.fresh)

    def traces_summary(self) -> str:
        """What becomes of the traces: "1 to train, 2 from the cache" (", 1 read from its file" with --trace)."""
        read = len(self.read)
        return (f"{len(self.fresh) - read} to train, {len(self.configs) - len(self.fresh)} from the cache"
                + (f", {read} {read_from(read)}" if read else ""))

    def summary(self) -> str:
        """What ``--check`` says: scenes to render, traces to train; and, with your own words, that fitting them
        (which builds the scenes, and may train) is the i18n check's work, not --check's."""
        where = f"on {self.scheduler}" if self.cluster else f"{min(self.n_jobs, max(len(self.todo), 1))} at once"
        read = len(self.read)
        own = [job for job in self.todo if job.text_overrides]
        return (f"{len(self.todo)} of {len(self.jobs)} scenes would be rendered ({where}), "
                f"{len(self.fresh) - read} of {len(self.configs)} traces would be trained"
                + (f", {read} {read_from(read)}" if read else "")
                + (f"; your own words are not fitted by --check: `render.py i18n check "
                   f"{' '.join(dict.fromkeys(job.scene for job in own))} --lang {own[0].lang}` with the same --text / "
                   "--config fits them" if own else ""))


def scene_texts(scene: type, lang: str, overrides: dict[str, str]) -> dict[str, str]:
    """``{key: text}`` of every string ``scene`` can say in ``lang`` with the ``overrides`` ("Owner.key"): part
    of its render key (a changed catalog entry or override re-renders the scenes that say it, and only those)
    and of its record. Empty for a scene that is no LectureScene."""
    if not hasattr(scene, "string"):
        return {}
    chain = i18n.owner_chain(scene)
    keys = set(i18n.texts_of("en", chain)) | {k.rpartition(".")[2] for k in overrides if k.rpartition(".")[0] in chain}
    keys |= {key for owner in scene.__mro__ for key in (vars(owner).get("strings") or {})}
    return {key: scene.string(key, lang, overrides) for key in sorted(keys)}


def plan_render(scenes: list[type], layers: list[Layer] | ParameterInputs, options: dict[str, Any], verbose: bool = False,
                concat_allowed: bool = False, scheduler: str | None = None) -> RenderPlan:
    """Check every input and plan the render of ``scenes`` (classes, lecture order) with the parameter
    ``layers`` (or the command's :class:`cli.params.ParameterInputs`, layered here) and the render ``options`` (keyed like :data:`cli.params.RENDER_DEFAULTS`; ``voice`` is
    resolved in place). Raises ConfigError or RenderError with one line; writes nothing."""
    import scenes as scene_package
    from cli.jobs import check_jobs, default_jobs
    from cli.media import RenderJob, check_cache_dir, check_output_dir, check_voice, source_digest, up_to_date
    from cli.params import check_common_keys, check_render_options, resolve_scenes
    from simulation.cache import is_cached
    from simulation.experiments import get_experiment
    from simulation.runs import check_memory
    from simulation.sweep import scheduler_address

    # 1. Every input, before any work.
    layers = as_layers(layers)
    by_name = {s.__name__: s for s in [*scene_package.ALL_SCENES, *scenes]}
    if options["concat"] and not concat_allowed:
        if any(layer.experiments.get("model", {}).get("trace") for layer in layers):  # was "use `all --concat`"
            raise ConfigError("--concat joins the lecture, and runs read from files (--trace) draw a few scenes of "
                              "their own: leave --concat out")
        raise ConfigError("concat joins the whole lecture: use `render.py all --concat`")
    check_render_options(options)
    active = {s.experiment: list(get_experiment(s.experiment).params())
              for s in scenes if getattr(s, "experiment", None)}
    check_common_keys(layers, active, all_params(), scenes)
    validate_scoped(layers, by_name)
    refuse_unused_sets(layers, set(active), {s.__name__ for s in scenes})
    words = merged_texts(layers)  # your own words: "Owner.key" -> text
    try:
        i18n.check_overrides(words, {owner for s in scenes for owner in i18n.owner_chain(s)})
    except i18n.I18nError as exc:
        raise ConfigError(str(exc)) from None
    # 2. The voice and the output folder (what this machine has: the command's preflight, cli/doctor.py).
    options["voice"] = check_voice(options["voice"], options["lang"], options["format"])
    output = Path(options["output"]).expanduser().absolute()
    check_output_dir(output)
    check_cache_dir()
    # 3. One job per scene; its key says whether the files on disk are still current.
    jobs, runs_of = [], {}
    resolved_all = resolve_scenes(layers, scenes)  # typed values, runs, knobs and sources (cli/params.py)
    for scene in scenes:
        resolved = resolved_all[scene.__name__]
        runs = resolved.runs
        why = undrawable(scene, runs)
        if why is not None:
            raise ConfigError(f"{scene.__name__} cannot draw this trace: {why}")
        job = RenderJob(scene=scene.__name__, module=scene.__module__, params=resolved.params,
                        attrs=resolved.attrs, traces=run_digests(runs),
                        source=source_digest(scene), quality=options["quality"], lang=options["lang"],
                        theme=options["theme"], format=options["format"], voice=options["voice"],
                        transparent=options["transparent"], output=str(output), verbose=verbose,
                        texts=scene_texts(scene, options["lang"], words),
                        text_overrides={k: v for k, v in words.items()
                                        if k.rpartition(".")[0] in i18n.owner_chain(scene)},
                        sources=resolved.sources)
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
    configs = list(dict.fromkeys(c for job in todo for c in runs_of[job.scene]))
    fresh = [c for c in configs if not is_cached(c)]
    for config in fresh:  # a run that cannot fit is refused before anything starts
        check_memory(config)
    n_jobs = options["jobs"]
    if n_jobs is not None:
        check_jobs(n_jobs, options["quality"])
    else:
        n_jobs = default_jobs(options["quality"])
    return RenderPlan(jobs=jobs, todo=todo, unchanged=unchanged, configs=configs, fresh=fresh,
                      scheduler=scheduler_address(scheduler), n_jobs=n_jobs, by_name=by_name)
