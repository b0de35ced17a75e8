"""Tiny scenes for the command-line tests: real Manim renders that take well under a second.

Example::

    PYTHONPATH=tests python render.py render cli_scenes:TinySquare --output /tmp/tiny
"""

from __future__ import annotations

from manim import Circle, Create, FadeOut, Square

from scenes.kit.base import LectureScene
from scenes.kit.style import make_text

__all__ = ["TinySquare", "TinyTrace", "TinySlow", "TinyStill", "TinyCircle"]


class TinySquare(LectureScene):
    """A square drawn and faded out: two animations, one subtitle, no LaTeX, no trace."""

    side: float = 1.0  # a scene parameter: --set TinySquare.side=2
    label: str = "A"
    strings = {"n": {"en": "a square", "zh": "一个正方形"}}

    def construct(self) -> None:
        square = Square(side_length=self.side)
        self.add(make_text(self.label, size=24).to_corner())
        self.narrate("n", 0.3)
        self.play(Create(square), run_time=0.2)
        self.play(FadeOut(square), run_time=0.2)


class TinyTrace(LectureScene):
    """Shows one number of the chain_rule experiment's first run: the gradient norm of block 0 at step 0."""

    experiment = "chain_rule"
    strings = {"title": {"en": "One number of a trace", "zh": "训练记录里的一个数"}, "n": {"en": "one number", "zh": "一个数"}}

    def construct(self) -> None:
        trace = next(iter(self.traces.values()))
        self.narrate("n", 0.3)
        self.add(make_text(self.number("grad_norm.0.0", trace["grad_norm"][0, 0]), size=24))
        self.play(Create(Circle()), run_time=0.2)


class TinySlow(LectureScene):
    """One long animation (ten minutes of frames, ~20 s to render at -q l): a render to interrupt. Long, so that
    it is still running when a test on a busy machine gets round to sending the signal."""

    def construct(self) -> None:
        self.play(Create(Circle()), run_time=600)


class TinyStill(LectureScene):
    """No animation at all: a still, but no video."""

    def construct(self) -> None:
        self.add(Square())


class TinyCircle(LectureScene):
    """A circle drawn over ``seconds`` (a scene parameter): a render long enough to kill a worker during it."""

    seconds: float = 1.0
    strings = {"n": {"en": "a circle", "zh": "一个圆"}}

    def construct(self) -> None:
        self.narrate("n", 0.3)
        self.play(Create(Circle()), run_time=self.seconds)
