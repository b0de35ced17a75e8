"""The lecture's words: one gettext catalog per language, read with Babel (torch-, manim- and click-free).

Example::

    python render.py i18n extract        # scan the scenes for the keys they use; check them against the template
    python render.py i18n init de        # locale/de/LC_MESSAGES/lecture.po, every entry to fill
    python -c "from narration.i18n import text; print(text('es', ['IdentityHighway', 'LectureScene'], 'title'))"

Layout (``locale/`` at the checkout's root, shipped as package data):

* ``locale/lecture.pot``: the template. One entry per string: ``msgctxt`` is ``"<Owner>.<key>"`` (the scene class
  that says it, or a shared owner: ``LectureScene`` for the words every scene has, ``SeedSpread``,
  ``UserModelScene``, ``Explorer``, ``Page``, ``Deck``), ``msgid`` the English text. It is where the English is
  written; no scene file holds a sentence (tests/test_i18n.py walks their syntax trees).
* ``locale/<lang>/LC_MESSAGES/lecture.po``: a language's catalog (Poedit, Weblate, ``pybabel update``). An empty
  or fuzzy ``msgstr`` is missing: that string falls back to the English, one string at a time. The English
  catalog's own ``msgstr`` rewords the English.

A scene asks for ``key`` along its class's method resolution order: ``ChainRuleExploding.title``, then
``ChainRuleProduct.title`` ... ``LectureScene.title``; the first owner the template has decides the entry.
Texts are ``str.format`` templates (``{depth}``): numbers are formatted per language by the code, never
written into a catalog. A noun that agrees with a count gives its forms by CLDR plural category in the field's
spec, ``{n} {n:plural:one=seed|other=seeds}`` (:func:`format_text`); a language gives the forms it has.
``en-XA`` is a pseudo-locale made from the English (accents, brackets, ~40 % longer): it shows which text would
not fit before any translator starts.
"""

from __future__ import annotations

import decimal
import functools
import math
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

ROOT = Path(__file__).resolve().parent.parent  # the checkout, or site-packages/residual_lecture when installed

__all__ = ["LOCALE_DIR", "TEMPLATE", "DOMAIN", "PSEUDO", "Language", "LANGUAGES", "I18nError", "language", "catalog_path",
           "languages", "template", "english", "messages", "lookup", "text", "fields", "pseudo", "coverage",
           "owner_chain", "check_overrides", "texts_of", "table", "used_keys", "missing_keys", "catalog_problems",
           "add_entry", "init_catalog", "update_catalogs", "catalog_langs", "clear_caches", "plural_category",
           "format_text"]

LOCALE_DIR = ROOT / "locale"
DOMAIN = "lecture"
TEMPLATE = LOCALE_DIR / f"{DOMAIN}.pot"
PSEUDO = "en-XA"  # the pseudo-locale: English, accented, bracketed and ~40 % longer


class I18nError(ValueError):
    """A catalog that cannot be read, a language without one, an override of a string that does not exist."""


@dataclass(frozen=True)
class Language:
    """How a language is drawn and read. ``font``: the Pango family of its texts (Noto where the Latin default
    DejaVu Sans lacks the script); ``direction``: "ltr" or "rtl" (Pango shapes right-to-left runs itself);
    ``reading_rate``: characters per second a subtitle reader keeps up with (white space not counted when
    ``spaces`` is False, as in Chinese); ``espeak``: the espeak-ng voice that speaks it, if any."""

    code: str
    name: str  # its own name for itself (the page's language menu)
    font: str = "DejaVu Sans"
    direction: str = "ltr"
    reading_rate: float = 17.0
    spaces: bool = True
    espeak: str | None = None


# The languages the lecture knows how to draw and speak; a catalog under locale/ makes one renderable.
LANGUAGES: dict[str, Language] = {lang.code: lang for lang in (
    Language("en", "English"),
    Language("zh", "中文", font="Noto Sans CJK SC", reading_rate=9.0, spaces=False),
    Language("es", "Español", espeak="es"),
    Language("de", "Deutsch", espeak="de"),
    Language("fr", "Français", espeak="fr-fr"),
    Language("ja", "日本語", font="Noto Sans CJK JP", reading_rate=9.0, spaces=False, espeak="ja"),
    Language("ar", "العربية", font="Noto Sans Arabic", direction="rtl", espeak="ar"),
    Language(PSEUDO, "[Ëñĝļîšĥ]"),
)}


def language(code: str) -> Language:
    """The table's entry for ``code``; a language with a catalog but no entry (``render.py i18n init pt``) is
    drawn in DejaVu Sans, read at 17 characters/s, named by Babel, and silent."""
    if code in LANGUAGES:
        return LANGUAGES[code]
    try:
        from babel import Locale

        name = Locale.parse(code.replace("-", "_")).get_display_name() or code
    except Exception:  # babel's UnknownLocaleError, ValueError
        name = code
    return Language(code, name)


def catalog_path(lang: str, root: Path | None = None) -> Path:
    """``locale/<lang>/LC_MESSAGES/lecture.po`` (the layout ``pybabel init/update -d locale -D lecture`` uses)."""
    return (root or LOCALE_DIR) / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def languages(root: Path | None = None) -> tuple[str, ...]:
    """Every renderable language: English, each language with a catalog under ``locale/``, and the pseudo-locale."""
    folder = root or LOCALE_DIR
    found = sorted(p.parent.parent.name for p in folder.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))
    ordered = ["en", "zh"] + [lang for lang in found if lang not in ("en", "zh")]
    return tuple(ordered) + (PSEUDO,)


def _read(path: Path):
    from babel.messages.pofile import read_po

    try:
        with open(path, "rb") as fh:
            return read_po(fh, abort_invalid=True)
    except FileNotFoundError:
        raise I18nError(f"no catalog {path}") from None
    except Exception as exc:  # babel's PoFileError, a UnicodeDecodeError ...
        raise I18nError(f"catalog {path} is unreadable: {exc}") from None


def _folder(root: Path | None) -> Path:
    """The catalogs' folder ``root`` names (``locale/`` when None), as the caches below are keyed: on the folder
    itself, so that a catalog read while another folder stood in for ``locale/`` is never served for it."""
    return Path(root) if root is not None else LOCALE_DIR


def template(root: Path | None = None) -> dict[str, str]:
    """``{"Owner.key": English text}`` of the template, in its order."""
    return _template(_folder(root))


@functools.lru_cache(maxsize=None)
def _template(folder: Path) -> dict[str, str]:
    return {m.context: m.id for m in _read(folder / f"{DOMAIN}.pot") if m.id and m.context}


@functools.lru_cache(maxsize=None)
def _translated(lang: str, folder: Path) -> dict[str, str]:
    """``{"Owner.key": text}`` of a catalog's entries that are translated (msgstr set, not fuzzy)."""
    return {m.context: m.string for m in _read(catalog_path(lang, folder))
            if m.id and m.context and m.string and not m.fuzzy}


def english(root: Path | None = None) -> dict[str, str]:
    """``{"Owner.key": English}``: the template's msgid, reworded where the English catalog sets a msgstr."""
    return _english(_folder(root))


@functools.lru_cache(maxsize=None)
def _english(folder: Path) -> dict[str, str]:
    out = dict(_template(folder))
    if catalog_path("en", folder).is_file():
        out.update({k: v for k, v in _translated("en", folder).items() if k in out})
    return out


def messages(lang: str, root: Path | None = None) -> dict[str, str]:
    """``{"Owner.key": text}`` of the entries ``lang`` has (without the English fallback; do not change it: it
    is cached). I18nError for a language that has no catalog."""
    return _messages(lang, _folder(root))


@functools.lru_cache(maxsize=None)
def _messages(lang: str, folder: Path) -> dict[str, str]:
    if lang == "en":
        return _english(folder)
    if lang == PSEUDO:
        return {k: pseudo(v) for k, v in _english(folder).items()}
    if lang not in LANGUAGES and not catalog_path(lang, folder).is_file():
        raise I18nError(f"unknown language {lang!r}; available: {', '.join(languages(folder))}")
    known = _template(folder)
    return {k: v for k, v in _translated(lang, folder).items() if k in known}


def owner_chain(scene: type) -> list[str]:
    """The owners a scene class reads its strings from, nearest first: the class names of its MRO."""
    return [cls.__name__ for cls in scene.__mro__ if cls is not object]


def lookup(contexts: Iterable[str], key: str, root: Path | None = None) -> str | None:
    """The first ``"Owner.key"`` of ``contexts`` the template has (None when none has ``key``)."""
    known = template(root)
    return next((f"{owner}.{key}" for owner in contexts if f"{owner}.{key}" in known), None)


def text(lang: str, contexts: Iterable[str], key: str, overrides: Mapping[str, str] | None = None,
         root: Path | None = None) -> str:
    """The text of ``key`` for ``contexts`` (nearest owner first) in ``lang``: an override ``"Owner.key"`` of any
    owner nearer than the catalog's entry wins; else the language's entry; else the English (a missing
    translation falls back string by string). KeyError if no owner has ``key``."""
    contexts = list(contexts)
    overrides = overrides or {}
    known = template(root)
    for owner in contexts:
        name = f"{owner}.{key}"
        if name in overrides:
            return overrides[name]
        if name in known:
            return messages(lang, root).get(name) or english(root)[name]
    raise KeyError(f"{contexts[0] if contexts else '?'} has no string {key!r}")


def texts_of(lang: str, contexts: Iterable[str], overrides: Mapping[str, str] | None = None,
             root: Path | None = None) -> dict[str, str]:
    """``{key: text}`` of every key the owners ``contexts`` can say, in ``lang`` with ``overrides``: what a
    scene draws and speaks, hence part of its render key and of its records."""
    contexts = list(contexts)
    keys = {name.rsplit(".", 1)[1] for name in template(root) if name.rsplit(".", 1)[0] in contexts}
    keys |= {name.rsplit(".", 1)[1] for name in (overrides or {}) if name.rsplit(".", 1)[0] in contexts}
    return {key: text(lang, contexts, key, overrides, root) for key in sorted(keys)}


def table(contexts: Iterable[str], langs: Iterable[str], root: Path | None = None) -> dict[str, dict[str, str]]:
    """``{key: {lang: text}}`` of every key the owners ``contexts`` can say (the shape of a scene's old inline
    ``strings``), for pages that show several languages at once (the explorer)."""
    contexts, langs = list(contexts), list(langs)
    by_lang = {lang: texts_of(lang, contexts, root=root) for lang in langs}
    return {key: {lang: by_lang[lang][key] for lang in langs} for key in by_lang[langs[0]]} if langs else {}


def fields(text: str) -> set[str]:
    """The ``str.format`` fields of ``text`` (``{depth}`` -> ``{"depth"}``)."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError:
        return {"<unbalanced braces>"}


@functools.lru_cache(maxsize=None)
def _plural_rule(lang: str):
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse("en" if lang == PSEUDO else lang.replace("-", "_")).plural_form
    except (UnknownLocaleError, ValueError):
        return Locale.parse("en").plural_form


def plural_category(lang: str, count) -> str:
    """The CLDR plural category of ``count`` in ``lang`` (Babel's rules): "one" for 1 in English, "other" for
    every count in Chinese or Japanese; Arabic has six. An unknown language counts as English. ``count`` may be a
    number or its text as the scene wrote it ("3", "1.0": visible decimals count, "1.0 seeds"); "other" for a text
    that is no number."""
    if isinstance(count, str):
        try:
            count = decimal.Decimal(count.strip().replace(",", ""))
        except decimal.InvalidOperation:
            return "other"
    if not (math.isfinite(count) if isinstance(count, float) else not isinstance(count, decimal.Decimal)
            or count.is_finite()):
        return "other"
    return _plural_rule(lang)(count)


class _PluralFormatter(string.Formatter):
    """``str.format`` plus one format spec: ``{n:plural:one=seed|other=seeds}`` is the word for the count ``n``."""

    def __init__(self, lang: str):
        self.lang = lang

    def format_field(self, value, format_spec: str) -> str:
        if not format_spec.startswith("plural:"):
            return super().format_field(value, format_spec)
        forms = dict(form.split("=", 1) for form in format_spec[len("plural:"):].split("|"))
        return forms.get(plural_category(self.lang, value), forms["other"])


def format_text(text: str, lang: str, /, **values) -> str:
    """A catalog's ``text`` (a ``str.format`` template) with ``values``, in ``lang``: a field written
    ``{n:plural:one=seed|other=seeds}`` (gettext's plural forms, inside one entry) becomes the form of CLDR's
    plural category of ``n`` (:func:`plural_category`), "other" where the text gives no form for it, so that
    "{k} of {n} {n:plural:one=seed|other=seeds}" reads "1 of 1 seed" and "2 of 3 seeds". A translation gives the
    forms its language has (Chinese: none, "{n} 个种子" for every count). KeyError for a field not given."""
    return _PluralFormatter(lang).format(text, **values)


def check_overrides(overrides: Mapping[str, str], owners: Iterable[str], root: Path | None = None) -> None:
    """I18nError (one line) for an override of a string that does not exist, or whose ``{fields}`` differ from
    the English (a number it would drop or one the code does not give). ``owners``: every class a render draws."""
    known = english(root)
    owners = set(owners)
    for name, value in overrides.items():
        owner, _, key = name.rpartition(".")
        if owner not in owners:
            raise I18nError(f"--text {name}: no scene {owner!r} in this render")
        if name not in known:
            keys = sorted(k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == owner)
            raise I18nError(f"--text {name}: {owner} has no string {key!r}; its strings: {', '.join(keys)}")
        if fields(value) != fields(known[name]):
            raise I18nError(f"--text {name}: the text must use the fields {sorted(fields(known[name]))} "
                            f"(got {sorted(fields(value))})")


# -- the pseudo-locale ------------------------------------------------------------------------

_ACCENTED = str.maketrans("abcdeghiklnorstuwyzABCDEGHIKLNORSTUWYZ", "åƀçðéĝĥîķļñöŕšţûŵýžÅƁÇÐÉĜĤÎĶĻÑÖŔŠŢÛŴÝŽ")
_PAD = "ōñé ţŵö ţĥŕéé ƒöûŕ ƒîvé šîx šévéñ éîĝĥţ ñîñé ţéñ".split()
_FIELD = re.compile(r"(\{[^{}]*\})")


def pseudo(english_text: str, growth: float = 0.4) -> str:
    """``english_text`` accented, ~``growth`` longer (padding words) and in brackets, its ``{fields}`` kept:
    "The identity highway" -> "[Ţĥé îðéñţîţý ĥîĝĥŵåý ōñé ţŵö]". Shows clipped, overlapping or untranslatable
    (hard-coded) text without a translator."""
    parts = [part if _FIELD.fullmatch(part) else part.translate(_ACCENTED) for part in _FIELD.split(english_text)]
    out = "".join(parts)
    target = len(english_text) * (1 + growth)
    pad = []
    while len(out) + 2 + len(" ".join(pad)) < target:
        pad.append(_PAD[len(pad) % len(_PAD)])
    return f"[{out}{' ' if pad else ''}{' '.join(pad)}]"


def coverage(lang: str, root: Path | None = None) -> tuple[int, int]:
    """``(translated, total)`` entries of ``lang``'s catalog (the pseudo-locale and English: all of them)."""
    total = len(template(root))
    return (total if lang in ("en", PSEUDO) else len(messages(lang, root))), total


# -- catalog upkeep: extract, add, init, update -------------------------------------------------

# Calls whose first argument is a string key of the scene (self.t("title"), self.narrate("n_intro", 3) ...).
KEY_CALLS = ("t", "text", "title", "narrate", "string")
SCENE_DIRS = ("scenes",)


def _write(path: Path, catalog) -> None:
    from babel.messages.pofile import write_po

    from simulation.atomic_io import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp, open(tmp, "wb") as fh:
        write_po(fh, catalog, width=0, include_lineno=False)
    clear_caches()


def clear_caches() -> None:
    """Forget the catalogs read so far (after one was written)."""
    for cached in (_template, _translated, _english, _messages):
        cached.cache_clear()


def used_keys(checkout: Path | None = None) -> dict[str, set[tuple[str, int]]]:
    """``{"Class.key": {(file, line), ...}}`` of every literal key a class of the scene files asks for:
    ``self.t("key")``, ``self.text``, ``self.title``, ``self.narrate``, and the keys of ``self.verdict_key``.
    Keys computed at run time (``self.t(name)``) are not seen: the dry-run tests ask for those."""
    import ast

    base = checkout or ROOT
    found: dict[str, set[tuple[str, int]]] = {}
    for folder in SCENE_DIRS:
        for path in sorted((base / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
                for node in ast.walk(cls):
                    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("self", "cls")):
                        continue
                    args = (node.args[:1] if node.func.attr in KEY_CALLS
                            else node.args[2:4] if node.func.attr == "verdict_key" else [])
                    for arg in args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            where = (str(path.relative_to(base)), node.lineno)
                            found.setdefault(f"{cls.name}.{arg.value}", set()).add(where)
    return found


def missing_keys(checkout: Path | None = None) -> list[str]:
    """One line per literal key a scene class of ``checkout`` (this one by default) uses (:func:`used_keys`)
    that neither its template (along the class's MRO, imported to know it) nor an inline ``strings`` table has:
    ``"file:line: Owner uses ..."``."""
    import importlib

    root = checkout / "locale" if checkout else None
    known, out = template(root), []
    for name, where in sorted(used_keys(checkout).items()):
        owner, _, key = name.rpartition(".")
        if name in known:
            continue
        file, line = sorted(where)[0]
        try:  # the owner's MRO: a Model* scene says its parent's keys too
            module = importlib.import_module(file[:-3].replace("/", "."))
            chain = owner_chain(getattr(module, owner))
        except Exception:  # not importable (a test's scratch file): the owner alone
            module, chain = None, [owner]
        if lookup(chain, key, root) is None and not _inline(module, owner, key):
            out.append(f"{file}:{line}: {owner} uses the string {key!r}, which locale/lecture.pot lacks")
    return out


def _inline(module, owner: str, key: str) -> bool:
    cls = getattr(module, owner, None)
    return cls is not None and any(key in (vars(c).get("strings") or {}) for c in cls.__mro__)


def catalog_problems(lang: str, root: Path | None = None) -> list[str]:
    """What is wrong with ``lang``'s catalog, one line each: an entry the template lacks, a translation whose
    ``{fields}`` differ from the English's (it would drop a number or ask for one the code does not give)."""
    known = template(root)
    out = [f"{lang}: {name} is not in the template (run `render.py i18n update`)"
           for name in _translated(lang, root) if name not in known]
    for name, value in messages(lang, root).items():
        if fields(value) != fields(known[name]):
            out.append(f"{lang}: {name} uses the fields {sorted(fields(value))}, the English "
                       f"{sorted(fields(known[name]))}")
    return out


def add_entry(name: str, english_text: str, translations: Mapping[str, str] | None = None,
              comment: str | None = None, location: str | None = None, root: Path | None = None) -> None:
    """Add the string ``name`` ("Owner.key") with its English to the template and to every catalog (with
    ``translations`` {lang: text} where given). I18nError if it exists or a translation's fields differ."""
    from babel.messages.pofile import read_po

    folder = root or LOCALE_DIR
    if name.count(".") < 1 or not all(name.split(".")):
        raise I18nError(f"{name!r}: a string's name is Owner.key (IdentityHighway.title)")
    if name in template(root):
        raise I18nError(f"{name} exists already: {template(root)[name]!r}")
    for lang, value in (translations or {}).items():
        if fields(value) != fields(english_text):
            raise I18nError(f"{name} [{lang}]: fields {sorted(fields(value))} differ from the English's "
                            f"{sorted(fields(english_text))}")
    flags = ["python-brace-format"] if fields(english_text) else []
    paths = [(folder / f"{DOMAIN}.pot", None)] + [(catalog_path(lang, root), lang) for lang in catalog_langs(root)]
    for path, lang in paths:
        with open(path, "rb") as fh:
            catalog = read_po(fh)
        catalog.add(english_text, (translations or {}).get(lang, "") if lang else "",
                    locations=[(location, None)] if location else (), flags=flags,
                    auto_comments=[comment] if comment else (), context=name)
        _write(path, catalog)


def catalog_langs(root: Path | None = None) -> list[str]:
    return [lang for lang in languages(root) if lang != PSEUDO and catalog_path(lang, root).is_file()]


def init_catalog(lang: str, root: Path | None = None) -> Path:
    """A new catalog for ``lang`` from the template, every entry to fill (``pybabel init``). I18nError if the
    code is not a locale Babel knows or the catalog exists."""
    from babel import Locale, UnknownLocaleError
    from babel.messages.pofile import read_po

    try:
        locale = Locale.parse(lang.replace("-", "_"))
    except (UnknownLocaleError, ValueError):
        locale = None
    # Babel reads a code it only partly knows as the part it knows ("no_such_module" as Norwegian "no"): the
    # code must be the locale's own, or the folder would be named by a language nobody chose
    if locale is None or str(locale) != lang.replace("-", "_"):
        raise I18nError(f"{lang!r} is not a language code Babel knows (es, de, pt_BR, ar ...)")
    path = catalog_path(lang, root)
    if path.exists():
        raise I18nError(f"{path} exists already; `render.py i18n update` brings it up to date")
    with open((root or LOCALE_DIR) / f"{DOMAIN}.pot", "rb") as fh:
        catalog = read_po(fh, locale=locale)
    catalog.locale = locale
    catalog.fuzzy = False
    _write(path, catalog)
    return path


def update_catalogs(root: Path | None = None) -> dict[str, tuple[int, int]]:
    """Merge the template into every catalog (``pybabel update``): new entries added empty, changed English
    marked fuzzy (missing until a translator checks it), removed ones kept as obsolete. Returns coverage."""
    from babel.messages.pofile import read_po

    with open((root or LOCALE_DIR) / f"{DOMAIN}.pot", "rb") as fh:
        pot = read_po(fh)
    out = {}
    for lang in catalog_langs(root):
        path = catalog_path(lang, root)
        with open(path, "rb") as fh:
            catalog = read_po(fh)
        catalog.update(pot, no_fuzzy_matching=True)
        _write(path, catalog)
        out[lang] = coverage(lang, root)
    return out
