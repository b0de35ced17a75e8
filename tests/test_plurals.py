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
