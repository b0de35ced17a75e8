"""Reusable mobjects that take plain numpy arrays: log-scale axes, bar pairs, block diagrams.

Example::

    axes, labels = make_log_axes(x_range=(1, 10), exp_range=(-10, 0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Axes, Circle, Line, MathTex, Rectangle, RoundedRectangle,
                   VGroup, VMobject)

from scenes.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text

__all__ = ["LogAxes", "safe_log10", "make_bar_pairs", "make_box", "make_add_node", "tick_exponents"]


def safe_log10(values: np.ndarray | Sequence[float], floor: float = 1e-300) -> np.ndarray:
    """log10 of ``values`` with 0 (an underflow) mapped to log10(floor) and NaN kept as NaN."""
    arr = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log10(np.where(arr > 0, arr, floor))
    return np.where(np.isnan(arr), np.nan, out)


def tick_exponents(exp_min: int, exp_max: int, max_ticks: int = 7) -> list[int]:
    """Integer exponents in [exp_min, exp_max], multiples of a common step (so 0 is one when in
    range), at most ``max_ticks`` of them."""
    step = max(1, math.ceil((exp_max - exp_min) / (max_ticks - 1)))
    first = math.ceil(exp_min / step) * step
    return list(range(first, exp_max + 1, step))


class LogAxes(VGroup):
    """Axes with a log10 y scale; tick labels such as '1e-8' drawn with Pango (no LaTeX).

    ``point(x, value)`` maps a data point to the scene (0 and underflow land on the floor, the bottom).
    Children: ``axes`` (Manim Axes over [x_min, x_max] x [0, exp_max - exp_min]) and ``ticks``.
    """

    def __init__(self, x_range: tuple[float, float, float], exp_range: tuple[int, int], width: float = 6.0,
                 height: float = 3.6) -> None:
        super().__init__()
        self.exp_min, self.exp_max = exp_range
        span = self.exp_max - self.exp_min
        self.axes = Axes(x_range=list(x_range), y_range=[0, span, 1], x_length=width, y_length=height, tips=False,
                         axis_config={"color": PALETTE["muted"], "stroke_width": 2},
                         y_axis_config={"include_ticks": False})
        self.ticks = VGroup()
        for exp in tick_exponents(self.exp_min, self.exp_max):
            label = make_text("1" if exp == 0 else f"1e{exp}", size=SIZE_SMALL, color=PALETTE["muted"])
            label.next_to(self.axes.c2p(x_range[0], exp - self.exp_min), LEFT, buff=0.12)
            grid = Line(self.axes.c2p(x_range[0], exp - self.exp_min), self.axes.c2p(x_range[1], exp - self.exp_min),
                        stroke_width=1, stroke_opacity=0.25, color=PALETTE["muted"])
            self.ticks.add(label, grid)
        self.add(self.axes, self.ticks)

    def point(self, x: float, value: float) -> np.ndarray:
        exp = float(np.clip(safe_log10([value])[0], self.exp_min, self.exp_max))
        return self.axes.c2p(x, exp - self.exp_min)


def make_bar_pairs(left: np.ndarray, right: np.ndarray, colors: tuple, width: float = 8.0,
                   height: float = 2.4, vmax: float | None = None) -> VGroup:
    """Side-by-side bars (linear scale) for ``left[i]`` and ``right[i]``, one pair per index.

    Returns VGroup(bars_left, bars_right, baseline); bars of NaN are drawn empty.
    """
    left, right = np.asarray(left, float), np.asarray(right, float)
    top = vmax or float(np.nanmax(np.concatenate([left, right])) or 1.0)
    n = len(left)
    slot = width / n
    bar_w = slot * 0.36
    groups = [VGroup(), VGroup()]
    for i in range(n):
        for side, (values, group) in enumerate(zip((left, right), groups)):
            value = values[i] if np.isfinite(values[i]) else 0.0
            h = max(height * value / top, 0.01)
            bar = Rectangle(width=bar_w, height=h, stroke_width=0, fill_color=colors[side], fill_opacity=0.9)
            x = -width / 2 + slot * (i + 0.5) + (side - 0.5) * bar_w * 1.1
            bar.move_to([x, h / 2, 0])
            group.add(bar)
    baseline = Line([-width / 2, 0, 0], [width / 2, 0, 0], color=PALETTE["muted"], stroke_width=2)
    return VGroup(groups[0], groups[1], baseline)


def make_box(label: str, width: float = 1.3, height: float = 0.6, color=None, math: bool = False) -> VGroup:
    """A rounded box with a centred label (Pango text, or MathTex when ``math``)."""
    color = color or PALETTE["branch"]
    box = RoundedRectangle(corner_radius=0.12, width=width, height=height, color=color, stroke_width=3)
    text = MathTex(label, font_size=30, color=PALETTE["text"]) if math else make_text(label, size=SIZE_LABEL)
    text.scale_to_fit_width(min(text.width, width * 0.85)).move_to(box)
    return VGroup(box, text)


def make_add_node(radius: float = 0.28, color=None) -> VGroup:
    """The ⊕ where the shortcut meets the branch."""
    color = color or PALETTE["identity"]
    circle = Circle(radius=radius, color=color, stroke_width=4)
    plus = VGroup(Line(LEFT * radius * 0.6, RIGHT * radius * 0.6), Line(DOWN * radius * 0.6, UP * radius * 0.6))
    plus.set_stroke(color, 4)
    return VGroup(circle, plus)
