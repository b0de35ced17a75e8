"""Tiny scenes with several beats for the deck, page and notebook tests: real renders of a few seconds.

Example::

    PYTHONPATH=.:tests python render.py slides present_scenes:TinyBeats present_scenes:TinyBeatsTwo -o /tmp/deck
"""

from __future__ import annotations

from manim import Circle, Create, FadeIn, FadeOut, Square, Triangle

from scenes.base import LectureScene
from scenes.style import make_text

__all__ = ["TinyBeats", "TinyBeatsTwo", "TinySilent"]


class TinyBeats(LectureScene):
    """Three beats. Something is drawn before the first narration (it joins beat 1); two narrations in a row
    with no animation between them make one beat; a last narration after the last animation joins the beat before."""

    strings = {
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

    strings = {"a": {"en": "a circle appears", "zh": "出现一个圆"}, "b": {"en": "and goes", "zh": "然后消失"}}

    def construct(self) -> None:
        self.narrate("a", 0.5)
        self.play(Create(Circle()), run_time=0.6)
        self.narrate("b", 0.5)
        self.play(FadeOut(Circle()), run_time=0.6)


class TinySilent(LectureScene):
    """No narration at all: the whole scene is one beat."""

    def construct(self) -> None:
        self.play(Create(Circle()), run_time=0.4)
