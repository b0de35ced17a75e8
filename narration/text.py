"""The words of a narrated line: reading time, Chinese text to pinyin (numbers as Chinese numerals), formulas
as English speech (torch- and manim-free).

Example::

    python -c "from narration.text import to_pinyin, split_zh; print(split_zh('残差块 y = x + F(x)'), to_pinyin('残差'))"
"""

from __future__ import annotations

import functools
import re

import numpy as np

from narration.i18n import LANGUAGES, language, languages

__all__ = ["LANGS", "READING_RATE", "cue_chars", "reading_time", "split_zh", "chinese_number", "to_pinyin", "PHRASES",
           "spoken_formula", "spoken_powers", "CJK_PUNCT"]

# the lecture's languages: en, zh, each language with a catalog under locale/, and the pseudo-locale en-XA
# (cli/params.py reads them the same way so that --help loads no numpy; tests/test_cli.py checks that the two agree)
LANGS = languages()
# characters per second a subtitle reader keeps up with: 17 in English (and other alphabets), 9 in Chinese
READING_RATE = {code: language.reading_rate for code, language in LANGUAGES.items()}


def cue_chars(text: str, lang: str) -> int:
    """Characters a reader must read: all of them in English (a language written with spaces), all but white
    space in Chinese."""
    return len(text.strip()) if language(lang).spaces else len(re.sub(r"\s", "", text))


def reading_time(text: str, lang: str) -> float:
    """Seconds ``text`` must stay on screen to be read at :data:`READING_RATE` (rounded up to 10 ms)."""
    return float(np.ceil(cue_chars(text, lang) / language(lang).reading_rate * 100 - 1e-9) / 100)


# -- Chinese text -> pinyin, with Latin runs split out -------------------------------------------

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff"
CJK_PUNCT = "，。：；？！、（）《》“”‘’…—"
_SPLIT = re.compile(rf"([{_CJK}{CJK_PUNCT}]+)")
_NUMBER = re.compile(r"^\d+(\.\d+)?$")
_DIGITS = "零一二三四五六七八九"


def split_zh(text: str) -> list[tuple[str, str]]:
    """A Chinese line as ``[(kind, chunk), ...]`` in order, kind ``"zh"`` (Chinese characters, Chinese
    punctuation and plain numbers, which are rewritten as Chinese numerals) or ``"latin"`` (words and
    formulas: ``ResNet``, ``GPT-2``, ``y = x + F(x)``, ``σ``). White space between chunks is dropped."""
    out: list[tuple[str, str]] = []
    for piece in _SPLIT.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if _SPLIT.fullmatch(piece):
            kind = "zh"
        elif _NUMBER.match(piece):
            kind, piece = "zh", chinese_number(piece)
        elif re.fullmatch(r"[\s,.;:!?()\-–—]+", piece):
            continue  # stray ASCII punctuation: a pause espeak-ng makes anyway
        else:
            kind = "latin"
        if out and out[-1][0] == kind == "zh":
            out[-1] = ("zh", out[-1][1] + piece)
        else:
            out.append((kind, piece))
    return out


def chinese_number(number: str) -> str:
    """``"152"`` -> ``"一百五十二"``, ``"0.05"`` -> ``"零点零五"`` (integers below 10^12)."""
    whole, _, frac = number.partition(".")
    text = _chinese_int(int(whole))
    return text + ("点" + "".join(_DIGITS[int(d)] for d in frac) if frac else "")


def _chinese_int(n: int) -> str:
    if n < 10:
        return _DIGITS[n]
    if n >= 10**12:
        return "".join(_DIGITS[int(d)] for d in str(n))
    groups, out = [], ""
    while n:
        groups.append(n % 10000)
        n //= 10000
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if group == 0:
            if out and not out.endswith("零"):
                out += "零"
            continue
        if out and group < 1000 and not out.endswith("零"):
            out += "零"
        out += _chinese_group(group) + ("", "万", "亿")[index]
    out = out.rstrip("零")
    return out[1:] if out.startswith("一十") else out  # 十五, not 一十五


def _chinese_group(n: int) -> str:
    out, zero = "", False
    for unit, value in (("千", 1000), ("百", 100), ("十", 10), ("", 1)):
        digit = n // value % 10
        if digit:
            out += ("零" if zero and out else "") + _DIGITS[digit] + unit
            zero = False
        else:
            zero = True
    return out


# Readings pypinyin's phrase dictionary gets wrong in this lecture's lines (差 chā in 残差, 标准差; 更 gèng
# before an adjective; 得 as a particle), in TONE3 form.
PHRASES = {"残差": "can2 cha1", "标准差": "biao1 zhun3 cha1", "更深": "geng4 shen1", "得更": "de5 geng4",
           "得慢": "de5 man4", "得动": "de5 dong4"}


@functools.lru_cache(maxsize=1)
def _load_phrases() -> None:
    from pypinyin import load_phrases_dict
    from pypinyin.contrib.tone_convert import to_tone

    load_phrases_dict({word: [[to_tone(p)] for p in tones.split()] for word, tones in PHRASES.items()})


def to_pinyin(chinese: str) -> str:
    """Tone-numbered pinyin for espeak-ng (``"残差，"`` -> ``"can2 cha1"``); tone 5 for neutral."""
    from pypinyin import Style, lazy_pinyin

    _load_phrases()

    syllables = lazy_pinyin(chinese, style=Style.TONE3, neutral_tone_with_five=True, errors=lambda s: list(s))
    words = []
    for syllable in syllables:
        if syllable in CJK_PUNCT or not syllable.strip():
            words.append("," if syllable not in "。？！" else ".")
        else:
            words.append(syllable)
    return re.sub(r"\s*([,.])(\s*[,.])*", r" \1", " ".join(words)).strip(" ,")


_FORMULA_WORDS = [(" - ", " minus "), ("=", " equals "), ("+", " plus "), ("−", " minus "), ("×", " times "), ("·", " times "),
                  ("&", " and "), ("σ", " sigma "), ("ε", " epsilon "), ("α", " alpha "), ("λ", " lambda "),
                  ("_", " "), ("(", " of "), (")", " "), ("^", " to the power ")]


_POWER_OF_TEN = re.compile("(×)?10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)")
_FROM_SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")


def spoken_powers(text: str) -> str:
    """Powers of ten as the screen writes them (scenes.kit.style.format_number: ``1.3×10²⁰``) as English speech:
    ``1.3 times ten to the 20``, ``ten to the minus 8``; the rest of ``text`` unchanged."""
    def say(match: re.Match) -> str:
        exponent = int(match.group(2).translate(_FROM_SUPERSCRIPT))
        power = f"ten to the {'minus ' if exponent < 0 else ''}{abs(exponent)}"
        return f" times {power}" if match.group(1) else power

    return _POWER_OF_TEN.sub(say, text)


def spoken_formula(latin: str) -> str:
    """A Latin run as English speech: powers of ten (:func:`spoken_powers`), operators and Greek letters as words
    (``F(x)`` -> ``F of x``)."""
    latin = spoken_powers(latin)
    for symbol, word in _FORMULA_WORDS:
        latin = latin.replace(symbol, word)
    return re.sub(r"\s+", " ", latin).strip()
