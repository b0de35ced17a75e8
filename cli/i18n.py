"""``render.py i18n``: the commands over the lecture's catalogs (extract, add, init, update, stats, check); the catalogs
themselves are read and written by :mod:`narration.i18n` (manim- and click-free, so that the scenes use it too).

Example::

    python render.py i18n extract
    python render.py i18n add IdentityHighway.my_key "English text" --lang zh "中文"
"""

from __future__ import annotations

import unicodedata

import click

from cli.options import PathType
from narration.i18n import (LANGUAGES, ROOT, TEMPLATE, I18nError, Language, add_entry, catalog_langs, coverage,
                            init_catalog, language, languages, missing_keys, template, update_catalogs, used_keys)

__all__ = ["i18n_command", "fit_check", "try_own_words"]


# -- render.py i18n ---------------------------------------------------------------------------

@click.group("i18n")
def i18n_command() -> None:
    """The lecture's words: catalogs per language under locale/ (gettext .po; Poedit, Weblate, pybabel)."""


@i18n_command.command("extract")
def extract_command() -> None:
    """Scan the scenes for the string keys they use; every one must have an entry in locale/lecture.pot.
    Exit status 1 (naming each) when one has none."""
    missing = missing_keys()
    for line in missing:
        click.echo(line)
    click.echo(f"{len(used_keys())} keys used in the scenes, {len(template())} entries in "
               f"{TEMPLATE.relative_to(ROOT)}; {len(missing)} missing")
    if missing:
        raise click.ClickException(f"{len(missing)} keys the scenes use have no entry (listed above): "
                                   "add them with `render.py i18n add Scene.key TEXT`")


@i18n_command.command("add")
@click.argument("name")
@click.argument("english_text")
@click.option("--lang", "translations", type=(str, str), multiple=True, metavar="LANG TEXT",
              help="Its translation in LANG (repeatable).")
@click.option("--comment", help="A note for translators (what a {field} holds, where it is shown).")
def add_command(name: str, english_text: str, translations: tuple[tuple[str, str], ...], comment: str | None) -> None:
    """Add the string NAME (Owner.key, e.g. IdentityHighway.caption) with its ENGLISH_TEXT to the template and
    every catalog."""
    try:
        add_entry(name, english_text, dict(translations), comment)
    except I18nError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"added {name} to {TEMPLATE.relative_to(ROOT)} and {len(catalog_langs())} catalogs")


@i18n_command.command("init")
@click.argument("lang")
def init_command(lang: str) -> None:
    """A new catalog for LANG (es, de, pt_BR ...) from the template: locale/LANG/LC_MESSAGES/lecture.po."""
    try:
        path = init_catalog(lang)
    except I18nError as exc:
        raise click.ClickException(str(exc)) from None
    done, total = coverage(lang)
    click.echo(f"{path.relative_to(ROOT)}: {total} strings to translate ({done} done); "
               f"render with --lang {lang} (missing strings fall back to English)")


@i18n_command.command("update")
def update_command() -> None:
    """Merge the template into every catalog (new entries empty, changed English fuzzy) and print coverage."""
    for lang, (done, total) in update_catalogs().items():
        click.echo(f"{lang}: {done}/{total} translated")


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: 2 for a wide or full-width character (中文), else 1."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@i18n_command.command("stats")
def stats_command() -> None:
    """How much of each language's catalog is translated."""
    for lang in languages():
        done, total = coverage(lang)
        name = language(lang).name
        click.echo(f"{lang:6s} {name}{' ' * max(1, 13 - display_width(name))}{done}/{total} "
                   f"({100 * done / max(total, 1):.0f} %)")


@i18n_command.command("check")
@click.argument("scene_names", nargs=-1, metavar="[SCENE]...")
@click.option("--lang", default="en", show_default=True, help="The language to check (a catalog's, or en-XA).")
@click.option("--text", "texts", multiple=True, metavar="SCENE.KEY=TEXT", help="Your own words, as render takes them.")
@click.option("--config", "config_file", type=PathType(dir_okay=False), default=None,
              help="A TOML file whose [text.SCENE] tables hold your own words.")
def check_command(scene_names: tuple[str, ...], lang: str, texts: tuple[str, ...], config_file: str | None) -> None:
    """Before rendering: does every text of SCENE... (default: the lecture) fit in LANG with your own words?

    Each scene is built without drawing a frame (its runs come from the trace cache, trained first where
    missing, as `render` would), with the layout check on. Prints, per scene, each text that reached past the
    frame's safe area (by how much, and whether it was wrapped onto a second line, moved or shrunk to fit)
    and each text that still overlaps another or leaves the frame. Exit status 1 when one does."""
    from cli.media import RenderError
    from cli.params import config_layer, merged_texts, parse_texts, read_config
    from cli.plan import scenes_or_lecture
    from narration.i18n import check_overrides, owner_chain
    from simulation.config import ConfigError

    try:
        if lang not in languages():
            raise ConfigError(f"unknown language {lang!r}; available: {', '.join(languages())}")
        scenes = scenes_or_lecture(scene_names)
        layers = [config_layer(read_config(config_file), config_file, [], None)] if config_file else []
        words = merged_texts([*layers, parse_texts(texts)])
        check_overrides(words, {owner for scene in scenes for owner in owner_chain(scene)})
    except (ConfigError, I18nError, RenderError) as exc:
        raise click.ClickException(str(exc)) from None
    bad = 0
    for scene in scenes:
        mine = {k: v for k, v in words.items() if k.rpartition(".")[0] in owner_chain(scene)}
        fitted, problems = fit_check(scene, lang, mine)
        lines = [f"  fitted: {note}" for note in fitted] + [f"  {p}" for p in problems]
        bad += bool(problems)
        click.echo(f"{scene.__name__} [{lang}]: " + ("fits" if not lines else f"{len(fitted)} fitted, "
                                                      f"{len(problems)} problems"))
        for line in lines:
            click.echo(line)
    click.echo(f"{len(scenes) - bad} of {len(scenes)} scenes fit in {lang}")
    if bad:
        raise click.ClickException(f"{bad} of {len(scenes)} scenes have texts that do not fit in {lang} (listed "
                                   "above): shorten them in the catalog or with --text")


def fit_check(scene: type, lang: str, overrides: dict[str, str]) -> tuple[list[str], list[str]]:
    """``scene`` built in ``lang`` with the words ``overrides`` ({"Owner.key": text}) without drawing a frame
    (its runs from the trace cache, trained first where missing), the fitter (scenes.kit.fit) and the layout check
    on: (what the fitter did to each text that did not fit: the text, by how much, how; what the layout check
    still finds: texts over each other, in the margin, below the floor, past the frame)."""
    from cli.media import scene_config

    variant = type(scene.__name__, (scene,), {"lang": lang, "text_overrides": dict(overrides), "check_layout": True,
                                              "fit_words": True, "__module__": scene.__module__})
    with scene_config({"dry_run": True, "quality": "low_quality", "disable_caching": True,
                       "verbosity": "ERROR", "progress_bar": "none"}):
        built = variant()
        built.render()
    return list(built.fitted), list(built.layout_log)


def try_own_words(plan, note) -> None:
    """Your own words (--text, [text.Scene] in --config) tried in their places before anything is rendered: each
    scene with an override is built without drawing (cli.i18n.fit_check; its runs trained first where missing);
    what the fitter had to do is said (the scene, the text, by how much, how), and a text that still does not fit
    (over another, past the frame, below the legibility floor) stops the render with the scene, the problem and
    nothing written. ``plan``: a cli.plan.RenderPlan; ``note``: prints a line. RenderError."""
    from cli.media import RenderError, make_variant

    bad = []
    for job in plan.todo:
        if not job.text_overrides:
            continue
        fitted, problems = fit_check(make_variant(plan.by_name[job.scene], job), job.lang, job.text_overrides)
        for line in fitted:
            note(f"{job.scene}: your words did not fit as written: {line}")
        bad += [f"{job.scene}: {problem}" for problem in problems]
    if bad:
        raise RenderError(f"your own words do not fit ({len(bad)} problems, nothing rendered): " + "; ".join(bad[:3])
                          + ("; ..." if len(bad) > 3 else "") + ": shorten them (render.py i18n check lists all)")
