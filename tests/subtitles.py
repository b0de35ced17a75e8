"""Subtitle checks shared by the scene tests: cues written as an .srt and read back, and their reading rate."""

from __future__ import annotations

import re

import srt

# Independent of narration: the usual subtitle rates, characters per second (Netflix-style guidance).
RATE = {"en": 17.0, "zh": 9.0}


def as_srt_cues(subcaptions) -> list[tuple[float, float, str]]:
    """Manim's subcaptions composed into .srt text (as its file writer does) and parsed back: (start, end, text)."""
    text = srt.compose(list(subcaptions))
    return [(s.start.total_seconds(), s.end.total_seconds(), s.content) for s in srt.parse(text)]


def chars(text: str, lang: str) -> int:
    return len(text.strip()) if lang == "en" else len(re.sub(r"\s", "", text))


def too_fast(cues, lang: str) -> list[str]:
    """Cues that run faster than the reading rate of ``lang``, as messages."""
    out = []
    for start, end, text in cues:
        seconds = end - start
        if seconds <= 0 or chars(text, lang) / seconds > RATE[lang] + 1e-9:
            out.append(f"{start:.2f}-{end:.2f} s, {chars(text, lang)} chars: {text!r}")
    return out
