"""``render.py i18n``: the commands over the lecture's catalogs (extract, add, init, update, stats); the catalogs
themselves are read and written by :mod:`narration.i18n` (manim- and click-free, so that the scenes use it too).

Example::

    python render.py i18n extract
    python render.py i18n add IdentityHighway.my_key "English text" --lang zh "中文"
"""

from __future__ import annotations

import click

from narration.i18n import (LANGUAGES, ROOT, TEMPLATE, I18nError, Language, add_entry, catalog_langs, coverage,
                            init_catalog, languages, missing_keys, template, update_catalogs, used_keys)

__all__ = ["i18n_command"]


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
        click.echo(line, err=True)
    click.echo(f"{len(used_keys())} keys used in the scenes, {len(template())} entries in "
               f"{TEMPLATE.relative_to(ROOT)}; {len(missing)} missing")
    if missing:
        raise SystemExit(1)


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


@i18n_command.command("stats")
def stats_command() -> None:
    """How much of each language's catalog is translated."""
    for lang in languages():
        done, total = coverage(lang)
        click.echo(f"{lang:6s} {LANGUAGES.get(lang, Language(lang, lang)).name:12s} {done}/{total} "
                   f"({100 * done / max(total, 1):.0f} %)")
