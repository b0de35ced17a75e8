"""Tiny narrated scenes for the voice tests: real renders of a few seconds, no LaTeX, no trace.

Example::

    PYTHONPATH=tests python render.py render voice_scenes:VoicedLines --voice --output /tmp/voiced
"""

from __future__ import annotations

from manim import Circle, Create, FadeOut, Square

from scenes.kit.base import LectureScene

__all__ = ["VoicedLines", "VoicedTail"]


class VoicedLines(LectureScene):
    """Two lines with a static wait between them: on a re-render that wait comes from Manim's cache, and
    Manim's own add_sound drops a sound added right after it (manim #4005, #4751)."""

    strings = {
        "n_first": {"en": "A residual block adds its input back.", "zh": "残差块把输入 x 加回到 F(x) 上。"},
        "n_second": {"en": "So the gradient gets a plus one.", "zh": "所以梯度多了一个 1。"},
    }

    def construct(self) -> None:
        square = Square()
        self.narrate("n_first", 0.5)
        self.play(Create(square), run_time=0.5)
        self.wait(0.5)
        self.narrate("n_second", 0.5)
        self.play(FadeOut(square), run_time=0.3)


class VoicedTail(LectureScene):
    """One line: the second clip of the joined-lecture test."""

    strings = {"n_tail": {"en": "That is the whole trick.", "zh": "这就是全部的窍门。"}}

    def construct(self) -> None:
        circle = Circle()
        self.narrate("n_tail", 0.5)
        self.play(Create(circle), run_time=0.4)
