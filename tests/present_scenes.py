"""Tiny scenes with several beats for the deck, page and notebook tests: real renders of a few seconds.

Example::

    PYTHONPATH=.:tests python render.py slides present_scenes:TinyBeats present_scenes:TinyBeatsTwo -o /tmp/deck
"""

from __future__ import annotations

import tempfile
import wave
from pathlib import Path

import numpy as np

from manim import Circle, Create, FadeIn, FadeOut, Square, Triangle

from scenes.kit.base import LectureScene
from scenes.kit.style import make_text

__all__ = ["TinyBeats", "TinyBeatsTwo", "TinySilent", "TinyVoiced"]


class TinyBeats(LectureScene):
    """Three beats. Something is drawn before the first narration (it joins beat 1); two narrations in a row
    with no animation between them make one beat; a last narration after the last animation joins the beat before."""

    strings = {
        "title": {"en": "Three shapes in three beats", "zh": "三拍画三个形状"},  # the deck's and the page's title
        "one": {"en": "first, a square", "zh": "先画一个正方形"},
        "two": {"en": "then a circle", "zh": "再画一个圆"},
        "two_more": {"en": "with a number beside it", "zh": "旁边有一个数"},
        "three": {"en": "last, a triangle", "zh": "最后画一个三角形"},
        "end": {"en": "that is all", "zh": "就这些"},
    }

    def construct(self) -> None:
        self.add(make_text("B", size=24).to_corner())
        self.play(FadeIn(Square(0.5)), run_time=0.2)
        self.narrate("one", 0.6)
        self.play(Create(Square()), run_time=0.8)
        self.narrate("two", 0.4)
        self.narrate("two_more", 0.4)
        self.add(make_text(self.number("answer", 42.0, digits=0), size=24).to_edge())
        self.play(Create(Circle()), run_time=0.8)
        self.narrate("three", 0.6)
        self.play(Create(Triangle()), run_time=0.6)
        self.play(FadeOut(Triangle()), run_time=0.2)
        self.narrate("end", 0.3)


class TinyBeatsTwo(LectureScene):
    """Two beats, no numbers: a second clip for the deck and the page."""

    strings = {"title": {"en": "A circle comes and goes", "zh": "圆来了又走"},
               "a": {"en": "a circle appears", "zh": "出现一个圆"}, "b": {"en": "and goes", "zh": "然后消失"}}

    def construct(self) -> None:
        self.narrate("a", 0.5)
        self.play(Create(Circle()), run_time=0.6)
        self.narrate("b", 0.5)
        self.play(FadeOut(Circle()), run_time=0.6)


class TinySilent(LectureScene):
    """No narration at all: the whole scene is one beat."""

    def construct(self) -> None:
        self.play(Create(Circle()), run_time=0.4)


class TinyVoiced(LectureScene):
    """Two beats with sound: a 440 Hz tone in the first, a 660 Hz tone in the second (Manim's add_sound)."""

    strings = {"a": {"en": "a low tone", "zh": "低音"}, "b": {"en": "a high tone", "zh": "高音"}}

    def construct(self) -> None:
        for key, pitch in (("a", 440.0), ("b", 660.0)):
            self.narrate(key, 0.5)
            self.add_sound(str(tone(pitch, 0.8)))
            self.play(Create(Circle()), run_time=0.8)


def tone(pitch: float, seconds: float, rate: int = 48_000) -> Path:
    """A mono 16-bit wav of a sine tone, written once into the system's temporary folder."""
    path = Path(tempfile.gettempdir()) / f"present-tone-{pitch:g}-{seconds:g}.wav"
    if not path.is_file():
        t = np.arange(round(seconds * rate)) / rate
        data = (0.5 * np.sin(2 * np.pi * pitch * t) * 32767).astype("<i2")
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(data.tobytes())
    return path
