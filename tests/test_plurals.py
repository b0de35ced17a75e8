"""Counts agree with their nouns on screen, in the subtitles and the decks (issue 34): "1 of 1 seed", "2 of 3
seeds", in every catalog (narration.i18n.format_text picks the form by Babel's CLDR plural rules)."""

from __future__ import annotations

import re
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from narration import i18n

SEED_NOUN = re.compile(r"\b(\d+) (seeds?)\b")


def _formatted(text: str, lang: str, count: int) -> str:
    return i18n.format_text(text, lang, **{name: count for name in i18n.fields(text)})


@pytest.mark.parametrize("lang", ["en", "zh", i18n.PSEUDO])
def test_every_catalog_entry_counts_seeds_in_agreement(lang):
    """Every string of the catalogs, each number 1 then 2: "1 seed", "2 seeds", never "1 seeds" or "2 seed"
    (Chinese has one form: "1 个种子"). Generated from the template: a new string is checked the day it is added."""
    checked = 0
    for name in i18n.template():
        text = i18n.text(lang, [name.rsplit(".", 1)[0]], name.rsplit(".", 1)[1])
        for count in (1, 2):
            for number, noun in SEED_NOUN.findall(_formatted(text, lang, count)):
                checked += 1
                assert (noun == "seed") == (number == "1"), (name, lang, _formatted(text, lang, count))
    assert checked >= 20 or lang == "zh"  # (Chinese: every entry translated, none says "seed")


def test_the_seed_count_says_1_seed_and_2_of_3_seeds():
    """The "(k of n seeds)" every seed-spread scene appends, through LectureScene.t (as the scenes call it)."""
    from scenes.kit.base import LectureScene
    from scenes.chain_rule import ChainRuleProduct
    from scenes.kit.seeds import with_seed_count

    said = {}
    for lang in ("en", "zh"):
        scene = types.SimpleNamespace(lang=lang, text_overrides=None, string=ChainRuleProduct.string)
        scene.t = lambda key, _scene=scene, **fmt: LectureScene.t(_scene, key, **fmt)
        said[lang] = [with_seed_count(scene, "holds", k, n) for k, n in ((1, 1), (2, 3), (0, 1))]
    assert said["en"] == ["holds (1 of 1 seed)", "holds (2 of 3 seeds)", "holds (0 of 1 seed)"]
    assert said["zh"] == ["holds（1 个种子中 1 个）", "holds（3 个种子中 2 个）", "holds（1 个种子中 0 个）"]


@given(count=st.integers(0, 10**6), k=st.integers(0, 10))
def test_a_plural_field_is_the_form_of_its_count_and_other_fields_format_as_ever(count, k):
    text = "{k:>3} of {n} {n:plural:one=seed|other=seeds} ({share:.1%})"
    out = i18n.format_text(text, "en", k=k, n=count, share=k / 10)
    assert out == f"{k:>3} of {count} {'seed' if count == 1 else 'seeds'} ({k / 10:.1%})"
    assert i18n.format_text("{n} {n:plural:one=种子|other=种子}", "zh", n=count) == f"{count} 种子"


def test_plural_categories_are_babels_and_a_missing_form_falls_back_to_other():
    assert [i18n.plural_category("en", n) for n in (0, 1, 2)] == ["other", "one", "other"]
    assert [i18n.plural_category("ar", n) for n in (0, 1, 2, 3, 11, 100)] == ["zero", "one", "two", "few", "many",
                                                                              "other"]
    assert i18n.plural_category("zh", 1) == "other" and i18n.plural_category("no-such-language", 1) == "one"
    assert i18n.format_text("{n:plural:one=a|other=b}", "ar", n=2) == "b"  # no "two" form given: "other"
    # a count the scene formatted itself: its text; visible decimals count as CLDR says; no number: "other"
    assert [i18n.plural_category("en", v) for v in ("1", "1.0", "3", "1,000", "n/a", float("nan"))] == [
        "one", "other", "other", "other", "other", "other"]
    assert i18n.fields("{k} of {n} {n:plural:one=seed|other=seeds}") == {"k", "n"}  # checks of fields unchanged


USER_COUNT = re.compile(r"\b(\d+) ((?:[a-z-]+ )?(?:steps?|additions?|blocks?|records?|layers?))\b")


def test_the_scenes_that_draw_a_users_file_agree_with_a_count_of_1():
    """A watched run or a ``--model`` can have one residual addition, and a partial trace one recorded step: the
    strings of the scenes that draw a user's file (UserModelScene and its subclasses, DepthTimeMap) say "1 residual
    addition x 1 recorded step", "2 residual additions". (The built-in runs' depths and step budgets are never 1.)"""
    import inspect

    import scenes.depth_time_map
    import scenes.user_model
    from scenes.user_model import UserModelScene

    owners = {name for module in (scenes.user_model, scenes.depth_time_map)
              for name, cls in inspect.getmembers(module, inspect.isclass) if issubclass(cls, UserModelScene)}
    checked = 0
    for name in i18n.template():
        owner, key = name.rsplit(".", 1)
        if owner not in owners:
            continue
        text = i18n.text("en", [owner], key)
        for count in (1, 2):
            said = _formatted(text, "en", count)
            for number, noun in USER_COUNT.findall(said):
                checked += 1
                assert (number == "1") == (not noun.endswith("s")), (name, said)
    assert checked >= 6  # DepthTimeMap's and the Model scenes' subtitles


# A count in English: a field, then up to two lower-case modifiers or fields ("{steps} SGD steps", "{depth} {act}
# blocks"), then a lower-case noun ending in "s" ("blocks", "steps", "nats"); a word like "with", "of" or "is" ends
# the look-ahead. The noun is the first field's of the chain.
_TOKEN = re.compile(r"\{[^{}]*\}|[A-Za-z][\w-]*|[^\s]")
_NOT_NOUNS = {"is", "was", "has", "does", "as", "its", "this", "thus", "plus", "less", "across", "always", "us"}
_STOPS = {"with", "without", "of", "in", "at", "to", "and", "or", "on", "by", "for", "from", "the", "a", "an", "when",
          "than", "per", "not", "within", "over", "after", "before"} | _NOT_NOUNS


def count_fields(text: str) -> dict[str, str]:
    """``{field: noun}`` for each field of an English ``text`` that counts a noun (see above); a field whose noun
    comes from its own ``{field:plural:...}`` is included too (its noun: "plural")."""
    tokens = _TOKEN.findall(text)
    found = {}
    for i, token in enumerate(tokens):
        if not token.startswith("{") or ":" in token:
            continue
        name = token[1:-1].split("!")[0]
        if i and tokens[i - 1].startswith("{") and ":" not in tokens[i - 1]:
            continue  # the second field of a chain ("{depth} {act} blocks"): the noun is the first's
        for ahead in tokens[i + 1:i + 4]:
            if ahead.startswith("{"):
                if ahead.startswith("{" + name + ":plural:"):
                    found[name] = "plural"
                    break
                continue
            if not ahead[0].isalpha() or ahead.lower() in _STOPS:
                break
            if ahead[0].islower() and ahead.endswith("s") and not ahead.endswith("ss"):
                found[name] = ahead
                break
    return found


def test_count_fields_finds_counted_nouns_and_nothing_else():
    """The detector the next test generates its cases with: "{n} blocks", "{steps} SGD steps", "{depth} {act}
    blocks" (depth's), a plural field; not "{residual} with shortcuts", "{act} MLPs", "{where} pass", "{k} of {n}"."""
    assert count_fields("{depth} blocks, {steps} SGD steps on digits") == {"depth": "blocks", "steps": "steps"}
    assert count_fields("{depth} {act} blocks each") == {"depth": "blocks"}
    assert count_fields("of {n} {n:plural:one=seed|other=seeds}") == {"n": "plural"}
    assert count_fields("{residual} with shortcuts, {plain} without; {act} MLPs; ({where} pass); {k} of {n}") == {}
    assert count_fields("block {block} is closest; {kl0} nats at the input") == {"kl0": "nats"}


def counts_without_plural(lang: str, root=None) -> tuple[list[str], int]:
    """(the count strings of ``lang``'s catalog under ``root`` whose count has no plural form, one line each; how
    many counts were checked). Generated from the template: every entry whose English counts a noun."""
    missing, checked = [], 0
    for name, english_text in i18n.template(root).items():
        owner, key = name.rsplit(".", 1)
        for field in count_fields(english_text):
            text = i18n.text(lang, [owner], key, root=root)
            checked += 1
            if f"{{{field}:plural:" not in text:
                missing.append(f"{name}: {{{field}}} in {text!r}")
                continue
            one, two = (i18n.format_text(text, lang, **{f: (c if f == field else 7) for f in i18n.fields(text)})
                        for c in (1, 2))
            if one == two:  # a form that does not follow the count
                missing.append(f"{name}: {{{field}}} says the same for 1 and 2: {one!r}")
    return missing, checked


@pytest.mark.parametrize("lang", ["en", "es"])
def test_every_count_in_the_catalogs_has_a_plural_form(lang):
    """Every catalog string that counts a noun gives the count's field a plural form ("{depth} {depth:plural:
    one=block|other=blocks}"), in English and in each translation that has plural forms: "1 block", never "1
    blocks", whatever the count a lecturer's or a user's run gives. Generated from the template: a count string added
    without a plural form fails here the day it is added. (Chinese has one form: nothing to check.)"""
    missing, checked = counts_without_plural(lang)
    assert not missing, f"{len(missing)} count strings without a plural form:\n" + "\n".join(missing)
    assert checked >= 50


def test_a_new_count_string_without_a_plural_form_is_found(tmp_path):
    """The twin of the above: a string added to a copy of the catalogs with a bare count ("after {n} steps") is
    reported, in English and in the Spanish it was given; with its plural form it is not."""
    import shutil

    from support import ROOT

    locale = tmp_path / "locale"
    shutil.copytree(ROOT / "locale", locale)
    i18n.add_entry("Tamper.bare", "after {n} steps", {"es": "tras {n} pasos"}, root=locale)
    i18n.add_entry("Tamper.plural", "after {n} {n:plural:one=step|other=steps}",
                   {"es": "tras {n} {n:plural:one=paso|other=pasos}"}, root=locale)
    try:
        for lang in ("en", "es"):
            missing, _ = counts_without_plural(lang, locale)
            assert [line.split(":")[0] for line in missing] == ["Tamper.bare"], missing
    finally:
        i18n.clear_caches()
