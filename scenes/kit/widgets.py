"""Reusable mobjects that take plain numpy arrays: log-scale axes, bar pairs, block diagrams.

Example::

    axes, labels = make_log_axes(x_range=(1, 10), exp_range=(-10, 0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Axes, Circle, CubicBezier, DashedVMobject, Line, MathTex,
                   Rectangle, RoundedRectangle, VGroup, VMobject)

from narration import i18n
from scenes.kit.helpers import finite_runs, log_range, missing_runs
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, current_language, make_text, power_of_ten
from scenes.kit.theme import stroke_opacity

__all__ = ["LogAxes", "safe_log10", "make_bar_pairs", "make_box", "make_add_node", "tick_exponents",
           "make_log_bars", "make_legend", "make_dashed_polyline", "make_highway_icon", "log_floor_exponent", "make_bar_row",
           "nice_ticks", "nice_axis", "LinearAxes", "thin_stroke", "GRID_OPACITY", "GroupedBars", "GapMark", "gapped_polyline", "axes_gap", "spread_labels"]


GRID_OPACITY = 0.25  # a chart's grid lines: the muted colour this opaque (more where the theme asks: stroke_opacity)


def thin_stroke(mob: VMobject, opacity: float, width: float | None = None) -> VMobject:
    """``mob`` (and its family) stroked ``width`` wide (None: as it is) at ``opacity``, raised where the theme asks
    thin strokes for contrast (:func:`scenes.kit.theme.stroke_opacity`: the light theme, 3:1); returns ``mob``.
    For the thin lines drawn beside a main one (the other seeds' curves)."""
    width = mob.get_stroke_width() if width is None else width
    return mob.set_stroke(width=width, opacity=stroke_opacity(mob.get_stroke_color(), opacity, width))


class GapMark(VGroup):
    """Where a trace lacks values: a dashed outline of ``width`` x ``height`` (scene units) with the
    word "missing" (in the scene's language) inside, turned upright when the outline is narrow.
    Tests find gaps by this class; ``what`` says which values it stands for."""

    def __init__(self, width: float, height: float, what: str = "", color=None) -> None:
        super().__init__()
        color = color or PALETTE["warn"]
        self.what = what
        width, height = max(width, 0.12), max(height, 0.3)
        self.outline = DashedVMobject(Rectangle(width=width, height=height, color=color, stroke_width=2),
                                      num_dashes=max(8, int(4 * (width + height))))
        self.label = make_text(i18n.text(current_language(), ["LectureScene"], "missing"), size=SIZE_SMALL, color=color)
        if self.label.width > width * 0.9 and height > width:
            self.label.rotate(math.pi / 2)
        self.label.scale_to_fit_height(min(self.label.height, height * 0.8))
        if self.label.width > width * 0.9:
            self.label.scale_to_fit_width(width * 0.9)
        self.label.move_to(self.outline)
        self.add(self.outline, self.label)


def gapped_polyline(points: Sequence[np.ndarray | None], color, stroke_width: float = 4,
                    gap_box=None) -> VMobject:
    """One VMobject through ``points`` (scene coordinates; None = missing), a separate piece for
    every run of present points, so a missing value leaves a gap instead of a straight bridge.
    ``gap_box(start, stop)`` -> a :class:`GapMark` for the missing points start..stop-1 (added as
    submobjects, so they appear with the line); None adds none. With no point at all the line is
    a single invisible point at the origin."""
    flags = [np.nan if p is None else 0.0 for p in points]
    line = VMobject(color=color, stroke_width=stroke_width)
    pieces = [[points[i] for i in range(a, b)] for a, b in finite_runs(flags)]
    if not pieces:
        line.set_points_as_corners([np.zeros(3), np.zeros(3)])
    for k, piece in enumerate(pieces):
        piece = piece if len(piece) > 1 else piece * 2
        if k == 0:
            line.set_points_as_corners(piece)
        else:
            line.start_new_path(piece[0])
            line.add_points_as_corners(piece[1:])
    if gap_box is not None:
        for start, stop in missing_runs(flags):
            line.add(gap_box(start, stop))
    return line


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
            label = make_text(power_of_ten(exp), size=SIZE_SMALL, color=PALETTE["muted"])
            label.next_to(self.axes.c2p(x_range[0], exp - self.exp_min), LEFT, buff=0.12)
            grid = Line(self.axes.c2p(x_range[0], exp - self.exp_min), self.axes.c2p(x_range[1], exp - self.exp_min),
                        stroke_width=1, stroke_opacity=stroke_opacity(PALETTE["muted"], GRID_OPACITY, 1),
                        color=PALETTE["muted"])
            self.ticks.add(label, grid)
        self.add(self.axes, self.ticks)

    def point(self, x: float, value: float) -> np.ndarray | None:
        """The scene point of (x, value); None when ``value`` is missing (NaN)."""
        log = safe_log10([value])[0]
        if np.isnan(log):
            return None
        return self.axes.c2p(x, float(np.clip(log, self.exp_min, self.exp_max)) - self.exp_min)

    def polyline(self, xs: Sequence[float], values: Sequence[float], color, stroke_width: float = 4,
                 what: str = "") -> VMobject:
        """The data (xs, values) as a line with a labelled :class:`GapMark` where values are missing."""
        xs = list(xs)
        return gapped_polyline([self.point(x, v) for x, v in zip(xs, values)], color, stroke_width,
                               gap_box=lambda a, b: axes_gap(self.axes, xs, a, b, what))


def axes_gap(axes: Axes, xs: Sequence[float], start: int, stop: int, what: str) -> GapMark:
    """A GapMark over the x span of the missing points start..stop-1, from the bottom of ``axes`` up."""
    left = axes.c2p(xs[max(start - 1, 0)] if start > 0 else xs[start], axes.y_range[0])
    right = axes.c2p(xs[min(stop, len(xs) - 1)] if stop < len(xs) else xs[stop - 1], axes.y_range[0])
    height = axes.y_length * 0.5 if hasattr(axes, "y_length") and axes.y_length else 1.0
    label = f"{what}[{xs[start]:g}..{xs[stop - 1]:g}]" if what else ""
    mark = GapMark(abs(right[0] - left[0]), height, label)
    return mark.move_to([(left[0] + right[0]) / 2, left[1] + mark.height / 2, 0])


def _missing_bar(width: float, height: float, bottom: np.ndarray, color) -> Rectangle:
    """A bar for a missing value: no fill (never a bar of 0), a GapMark standing on the baseline."""
    bar = Rectangle(width=width, height=0.01, stroke_width=0, fill_color=color, fill_opacity=0)
    bar.move_to(bottom + UP * 0.005)
    mark = GapMark(width, height)
    bar.add(mark.move_to(bottom + UP * mark.height / 2))
    return bar


def make_bar_pairs(left: np.ndarray, right: np.ndarray, colors: tuple, width: float = 8.0,
                   height: float = 2.4, vmax: float | None = None) -> VGroup:
    """Side-by-side bars (linear scale) for ``left[i]`` and ``right[i]``, one pair per index.

    Returns VGroup(bars_left, bars_right, baseline); a missing (NaN) value is a labelled GapMark.
    """
    left, right = np.asarray(left, float), np.asarray(right, float)
    both = np.concatenate([left, right])
    top = vmax or float(np.max(both[np.isfinite(both)], initial=0.0) or 1.0)
    n = len(left)
    slot = width / n
    bar_w = slot * 0.36
    groups = [VGroup(), VGroup()]
    for i in range(n):
        for side, (values, group) in enumerate(zip((left, right), groups)):
            x = -width / 2 + slot * (i + 0.5) + (side - 0.5) * bar_w * 1.1
            if np.isnan(values[i]):
                group.add(_missing_bar(bar_w, height * 0.4, np.array([x, 0, 0]), colors[side]))
                continue
            value = values[i] if np.isfinite(values[i]) else top
            h = max(height * min(value, top) / top, 0.01)
            bar = Rectangle(width=bar_w, height=h, stroke_width=0, fill_color=colors[side], fill_opacity=0.9)
            bar.move_to([x, h / 2, 0])
            group.add(bar)
    baseline = Line([-width / 2, 0, 0], [width / 2, 0, 0], color=PALETTE["muted"], stroke_width=2)
    return VGroup(groups[0], groups[1], baseline)


def make_box(label: str, width: float = 1.3, height: float = 0.6, color=None, math: bool = False) -> VGroup:
    """A rounded box with a centred label (Pango text, or MathTex when ``math``).

    Filled with the background colour, so a line drawn beneath it (a path through the block) stays hidden."""
    color = color or PALETTE["branch"]
    box = RoundedRectangle(corner_radius=0.12, width=width, height=height, color=color, stroke_width=3,
                           fill_color=PALETTE["background"], fill_opacity=1)
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


def log_floor_exponent(values: np.ndarray | Sequence[float], margin: int = 1, lowest: int = -300) -> int:
    """Integer exponent just below the smallest positive finite value of ``values`` (for LogAxes);
    ``lowest`` when nothing is positive (every value underflowed)."""
    arr = np.asarray(values, dtype=np.float64)
    if not (np.isfinite(arr) & (arr > 0)).any():
        return lowest
    return log_range(arr, margin=margin, lowest=lowest)[0]


def make_log_bars(axes: LogAxes, values: np.ndarray | Sequence[float], color, x_offset: float = 0.0,
                  bar_width: float = 0.25, xs: Sequence[float] | None = None) -> VGroup:
    """One bar per value on ``axes`` (log scale), rising from the floor; bar i stands at
    ``xs[i] + x_offset`` (data units, default xs = 1..n). 0 and underflow give a flat sliver on the
    floor; a missing (NaN) value gives a labelled GapMark."""
    values = np.asarray(values, dtype=np.float64)
    xs = np.arange(1, len(values) + 1) if xs is None else np.asarray(xs, dtype=np.float64)
    unit = axes.axes.x_axis.get_unit_size()
    bars = VGroup()
    for x, value in zip(xs, values):
        bottom = axes.axes.c2p(x + x_offset, 0)
        if np.isnan(value):
            bars.add(_missing_bar(bar_width * unit, axes.axes.y_length * 0.3, bottom, color))
            continue
        top = axes.point(x + x_offset, value)
        height = max(float(top[1] - bottom[1]), 0.01)
        bar = Rectangle(width=bar_width * unit, height=height, stroke_width=0, fill_color=color, fill_opacity=0.9)
        bar.move_to(bottom + UP * height / 2)
        bars.add(bar)
    return bars


def make_legend(entries: Sequence[tuple[str, object]], size: float = SIZE_SMALL, swatch: float = 0.35) -> VGroup:
    """Rows of (coloured line, label) for ``entries`` = [(label, colour), ...], stacked downwards."""
    rows = VGroup()
    for label, color in entries:
        line = Line(LEFT * swatch / 2, RIGHT * swatch / 2, color=color, stroke_width=6)
        rows.add(VGroup(line, make_text(label, size=size, color=color)).arrange(RIGHT, buff=0.12))
    return rows.arrange(DOWN, aligned_edge=LEFT, buff=0.1)


def make_dashed_polyline(points: Sequence[np.ndarray], color, stroke_width: float = 3,
                         num_dashes: int = 40) -> DashedVMobject:
    """A dashed line through ``points`` (scene coordinates)."""
    path = VMobject(stroke_width=stroke_width, color=color).set_points_as_corners([np.asarray(p) for p in points])
    return DashedVMobject(path, num_dashes=num_dashes)


def make_highway_icon(length: float = 4.0, ramp_height: float = 0.9, lane_color=None, ramp_color=None,
                      lane_width: float = 10, ramp_width: float = 4) -> VGroup:
    """A straight main line (the identity path) and a ramp that leaves and rejoins it (the branch).

    Returns VGroup(main, ramp); both are open paths from left to right, usable with MoveAlongPath.
    """
    lane_color, ramp_color = lane_color or PALETTE["identity"], ramp_color or PALETTE["branch"]
    left, right = np.array([-length / 2, 0, 0]), np.array([length / 2, 0, 0])
    main = Line(left, right, color=lane_color, stroke_width=lane_width)
    exit_, entry = left + RIGHT * length * 0.18, right + LEFT * length * 0.18
    top_left, top_right = exit_ + RIGHT * length * 0.14 + UP * ramp_height, entry + LEFT * length * 0.14 + UP * ramp_height
    ramp = VMobject(color=ramp_color, stroke_width=ramp_width)
    ramp.set_points(np.concatenate([
        CubicBezier(exit_, exit_ + RIGHT * length * 0.08, top_left + LEFT * length * 0.08, top_left).points,
        Line(top_left, top_right).points,
        CubicBezier(top_right, top_right + RIGHT * length * 0.08, entry + LEFT * length * 0.08, entry).points,
    ]))
    return VGroup(main, ramp)


def nice_ticks(low: float, high: float, max_ticks: int = 5) -> list[float]:
    """Round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) covering [low, high]."""
    span = float(high - low)
    if not math.isfinite(span) or span <= 0:
        return [float(low)]
    raw = span / max(max_ticks - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def nice_axis(low: float, high: float, max_ticks: int = 4, margin: float = 0.05) -> tuple[float, float, list[float]]:
    """A linear axis for data in [``low``, ``high``]: ``(start, end, ticks)``. The data range is widened by ``margin``
    of its span on each side (by ``margin`` of |value|, or 1, where it is one value), ``ticks`` are
    :func:`nice_ticks` inside it (at most ``max_ticks``), and the ends are rounded outwards to half a tick step, so
    the data fill most of the axis and every tick label is a round real value. Data that are all >= 0 never give an
    axis below 0. Raises ValueError for a non-finite or reversed range."""
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        raise ValueError(f"nice_axis needs a finite range low <= high; got [{low}, {high}]")
    pad = margin * (high - low) if high > low else margin * abs(high) or 1.0
    lo, hi = low - pad, high + pad
    if low >= 0:
        lo = max(lo, 0.0)
    ticks = nice_ticks(lo, hi, max_ticks)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 10.0 ** math.floor(math.log10(hi - lo))
    half = step / 2
    start, end = math.floor(lo / half + 1e-9) * half, math.ceil(hi / half - 1e-9) * half
    if low >= 0:
        start = max(start, 0.0)
    return round(start, 12), round(end, 12), ticks


def _tick_text(value: float) -> str:
    return f"{value:g}"


class LinearAxes(VGroup):
    """Axes with linear scales whose tick labels are Pango text (no LaTeX), with faint grid lines.

    ``point(x, y)`` maps data to the scene. ``x_ticks`` / ``y_ticks`` default to :func:`nice_ticks`;
    ``x_format`` / ``y_format`` turn a tick value into its label (default ``f"{v:g}"``).
    Children: ``axes`` (Manim Axes), ``ticks`` (labels and grid lines).
    """

    def __init__(self, x_range: tuple[float, float], y_range: tuple[float, float], width: float = 6.0,
                 height: float = 3.2, x_ticks: Sequence[float] | None = None, y_ticks: Sequence[float] | None = None,
                 x_format=_tick_text, y_format=_tick_text, grid: bool = True) -> None:
        super().__init__()
        (x0, x1), (y0, y1) = x_range, y_range
        self.axes = Axes(x_range=[x0, x1, (x1 - x0) or 1], y_range=[y0, y1, (y1 - y0) or 1], x_length=width,
                         y_length=height, tips=False, axis_config={"color": PALETTE["muted"], "stroke_width": 2,
                                                                   "include_ticks": False})
        self.ticks = VGroup()
        for x in nice_ticks(x0, x1) if x_ticks is None else x_ticks:
            label = make_text(x_format(x), size=SIZE_SMALL, color=PALETTE["muted"])
            self.ticks.add(label.next_to(self.axes.c2p(x, y0), DOWN, buff=0.1))
        for y in nice_ticks(y0, y1) if y_ticks is None else y_ticks:
            label = make_text(y_format(y), size=SIZE_SMALL, color=PALETTE["muted"])
            self.ticks.add(label.next_to(self.axes.c2p(x0, y), LEFT, buff=0.1))
            if grid and y != y0:
                self.ticks.add(Line(self.axes.c2p(x0, y), self.axes.c2p(x1, y), stroke_width=1,
                                    stroke_opacity=stroke_opacity(PALETTE["muted"], GRID_OPACITY, 1),
                                    color=PALETTE["muted"]))
        self.add(self.axes, self.ticks)

    def point(self, x: float, y: float) -> np.ndarray:
        return self.axes.c2p(x, y)

    def polyline(self, xs: Sequence[float], ys: Sequence[float], color, stroke_width: float = 4,
                 what: str = "") -> VMobject:
        """The data (xs, ys) as a line; a missing (NaN) y leaves a gap with a labelled :class:`GapMark`,
        an infinite one is clipped to the chart's edge."""
        xs, ys = list(xs), np.asarray(ys, dtype=np.float64)
        y0, y1 = self.axes.y_range[0], self.axes.y_range[1]
        points = [None if np.isnan(y) else self.point(x, float(np.clip(y, y0, y1))) for x, y in zip(xs, ys)]
        return gapped_polyline(points, color, stroke_width,
                               gap_box=lambda a, b: axes_gap(self.axes, xs, a, b, what))


class GroupedBars(VGroup):
    """One group of bars per index, one bar per series, on a linear y axis from 0.

    ``series``: k arrays of length n (a missing NaN value is a labelled GapMark); ``labels``: n strings under
    the groups (default 1..n, thinned to about 12; an empty list: none, the caller labels the groups). Children: ``chart`` (:class:`LinearAxes`) and
    ``bars`` (one VGroup of n Rectangles per series).
    """

    def __init__(self, series: Sequence[np.ndarray], colors: Sequence, width: float = 5.5, height: float = 2.6,
                 y_max: float | None = None, labels: Sequence[str] | None = None, y_format=_tick_text) -> None:
        super().__init__()
        series = [np.asarray(s, dtype=np.float64) for s in series]
        n, k = len(series[0]), len(series)
        joined = np.concatenate(series)
        top = y_max or float(np.max(joined[np.isfinite(joined)], initial=0.0) or 1.0)
        y_ticks = nice_ticks(0, top, 4)
        if len(y_ticks) > 1 and y_ticks[-1] < top:  # round the axis up to the next tick
            y_ticks.append(round(2 * y_ticks[-1] - y_ticks[-2], 12))
        top = y_ticks[-1] if len(y_ticks) > 1 else top
        labels = [str(i + 1) for i in range(n)] if labels is None else list(labels)
        every = max(1, math.ceil(n / 12))
        self.chart = LinearAxes((0, n), (0, top), width, height, x_ticks=[], y_ticks=y_ticks, y_format=y_format)
        for i in range(0, n if labels else 0, every):
            label = make_text(labels[i], size=SIZE_SMALL, color=PALETTE["muted"])
            self.chart.ticks.add(label.next_to(self.chart.point(i + 0.5, 0), DOWN, buff=0.1))
        unit = self.chart.axes.x_axis.get_unit_size()
        bar_w = 0.8 / k
        self.bars = VGroup()
        for s, (values, color) in enumerate(zip(series, colors)):
            group = VGroup()
            for i, value in enumerate(values):
                x = i + 0.5 + (s - (k - 1) / 2) * bar_w
                if np.isnan(value):
                    group.add(_missing_bar(bar_w * unit * 0.92, height * 0.4, self.chart.point(x, 0), color))
                    continue
                h = self.chart.point(0, min(value, top))[1] - self.chart.point(0, 0)[1]
                bar = Rectangle(width=bar_w * unit * 0.92, height=max(h, 0.01), stroke_width=0, fill_color=color,
                                fill_opacity=0.9)
                bar.move_to(self.chart.point(x, 0) + UP * max(h, 0.01) / 2)
                group.add(bar)
            self.bars.add(group)
        self.add(self.chart, self.bars)

    def level_line(self, y: float, color, stroke_width: float = 2) -> Line:
        """A horizontal line across the chart at data height ``y``."""
        n = self.chart.axes.x_range[1]
        return Line(self.chart.point(0, y), self.chart.point(n, y), color=color, stroke_width=stroke_width)


def make_bar_row(values: np.ndarray | Sequence[float], color, width: float = 3.0, height: float = 1.2,
                 vmax: float | None = None, gap: float = 0.25) -> VGroup:
    """A row of bars (linear scale, baseline at the bottom) for ``values`` [n], scaled so that ``vmax``
    (default: the largest value) is ``height`` tall; several rows share a scale by sharing ``vmax``.
    Returns VGroup(bars, baseline); values <= 0 give a flat sliver, a missing (NaN) one a GapMark."""
    values = np.asarray(values, dtype=np.float64)
    top = float(vmax if vmax is not None else np.max(values[np.isfinite(values)], initial=0.0)) or 1.0
    slot = width / len(values)
    bars = VGroup()
    for i, value in enumerate(values):
        if np.isnan(value):
            bars.add(_missing_bar(slot * (1 - gap), height * 0.5, np.array([-width / 2 + slot * (i + 0.5), 0, 0]),
                                  color))
            continue
        h = max(height * float(value) / top, 0.01) if np.isfinite(value) and value > 0 else 0.01
        bar = Rectangle(width=slot * (1 - gap), height=h, stroke_width=0, fill_color=color, fill_opacity=0.9)
        bars.add(bar.move_to([-width / 2 + slot * (i + 0.5), h / 2, 0]))
    baseline = Line([-width / 2, 0, 0], [width / 2, 0, 0], color=PALETTE["muted"], stroke_width=2)
    return VGroup(bars, baseline)


def spread_labels(labels: VGroup, vertical: bool = True, gap: float = 0.04) -> VGroup:
    """Move overlapping ``labels`` apart, in place: upwards in the order of their height (``vertical``), or, for
    labels side by side at one height, each one that would touch its left neighbour up by its own height."""
    items = sorted(labels, key=lambda m: m.get_center()[1 if vertical else 0])
    for below, above in zip(items, items[1:]):
        if vertical:
            overlap = below.get_top()[1] + gap - above.get_bottom()[1]
            if overlap > 0:
                above.shift(UP * overlap)
        elif (below.get_right()[0] + gap > above.get_left()[0]
              and abs(below.get_center()[1] - above.get_center()[1]) < below.height):
            above.shift(UP * (below.height + gap))
    return labels
