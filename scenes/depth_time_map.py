"""DepthTimeMap: ‖∂L/∂h‖ of every block at every recorded step, one picture, with the loss beneath.

Example::

    python render.py render DepthTimeMap --trace runs/resnet50.npz       # a run watched in your own loop
    python render.py render DepthTimeMap --model examples/my_resnet.py:build --set data=digits-image

One depth x time map of the gradient that reached each residual block's output h (the trace's ``out_grad_norm``
[T, B]: L2 norm of dL/dh over the batch): a row per block in forward order (the input side on top), a column per
recorded step, the colour on a log scale with a labelled colour bar; beneath it, on the same step axis, the
training loss (``loss_curve``, every step). What wandb.watch draws as one histogram per parameter is here one
picture of the whole network.

Legible from 2 to 300 blocks and from 2 to 10,000 recorded steps: the map is an image (Manim's ImageMobject,
nearest-neighbour: a cell stays a sharp rectangle) of at most :data:`MAX_COLUMNS` columns and :data:`MAX_ROWS` rows
(:func:`depth_time_grid` aggregates neighbouring records or blocks by the mean of log10, the geometric mean); at
most :data:`MAX_LABELS` block names, spread evenly, never below the house's small size. An exact 0 (a float32
gradient that underflowed) is drawn in the lowest colour, a non-finite value in the warning colour, a cell with no
record (NaN) in the background's.
"""

from __future__ import annotations

import math

import numpy as np
from manim import (DOWN, LEFT, RESAMPLING_ALGORITHMS, RIGHT, UP, Create, FadeIn, Group, ImageMobject, Line, Mobject,
                   Rectangle, VGroup, config, linear)

from simulation.experiments import RESIDUAL

from scenes.kit.block_labels import middle_ellipsis, short_name, split_prefix
from scenes.kit.layout import MARGIN, line_width
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, power_of_ten
from scenes.kit.theme import VIRIDIS, to_rgb
from scenes.kit.widgets import LinearAxes, nice_axis, nice_ticks, safe_log10, tick_exponents
from scenes.user_model import UserModelScene

__all__ = ["DepthTimeMap", "depth_time_grid", "grid_colors", "label_rows", "color_scale", "loss_axis", "loss_line", "MAX_COLUMNS",
           "MAX_ROWS", "MAX_LABELS"]

MAX_COLUMNS = 600  # columns of the map image: recorded steps beyond this are averaged (log10) in equal step bins
MAX_ROWS = 300  # rows: more blocks than this are averaged in groups of neighbours
MAX_LABELS = 10  # block names beside the map at most (the map is 3.4 units tall; SIZE_SMALL is ~0.25)
LABEL_GAP = 0.0  # scene units between two block names beside the map, at least: they may touch, never overlap
HEADING_GAP = 0.04  # scene units between the first block name and the heading above the names, at least
MAX_LOSS_POINTS = 600  # points of the loss line (means over equal step bins beyond that)
UNDERFLOW, OVERFLOW = -np.inf, np.inf  # grid markers: every value of the cell was 0; one was not finite


class _PillowForManim:
    """``manim.camera.camera.Image`` (PIL.Image) with one call fixed: Manim 0.22 pastes an image mobject onto
    ``Image.fromarray(np.zeros((h, w)), mode="RGBA")``, a float array that Pillow 11.3+ refuses ("Invalid mode for
    data type"); that blank canvas is made with ``Image.new`` here. Every other call goes to PIL.Image."""

    def __getattr__(self, name: str):
        from PIL import Image

        return getattr(Image, name)

    @staticmethod
    def fromarray(obj, mode=None):
        from PIL import Image

        array = np.asarray(obj)
        if mode == "RGBA" and array.ndim == 2 and array.dtype.kind == "f" and not array.any():
            return Image.new("RGBA", (array.shape[1], array.shape[0]))
        return Image.fromarray(obj, mode=mode) if mode is not None else Image.fromarray(obj)


def draw_images_on_pillow() -> None:
    """Let Manim's Cairo camera draw an ImageMobject with this Pillow (:class:`_PillowForManim`); idempotent."""
    import manim.camera.camera as camera

    if not isinstance(camera.Image, _PillowForManim):
        camera.Image = _PillowForManim()


def _bins(n: int, limit: int) -> np.ndarray:
    """Edges of ``min(n, limit)`` near-equal groups of ``n`` items: int [groups + 1]."""
    return np.linspace(0, n, min(n, limit) + 1).round().astype(int)


def _log_mean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean of log10 over ``axis`` of the positive finite values; -inf where the only values are 0, +inf where one
    is not finite (inf or a NaN from a diverged step is no gap: NaN marks no record), NaN where there are none."""
    with np.errstate(divide="ignore", invalid="ignore"):
        positive = np.isfinite(values) & (values > 0)
        logs = np.where(positive, np.log10(np.where(positive, values, 1.0)), 0.0)
        count = positive.sum(axis)
        out = np.where(count > 0, logs.sum(axis) / np.maximum(count, 1), np.nan)
    out = np.where((count == 0) & (values == 0).any(axis), UNDERFLOW, out)
    return np.where(np.isinf(values).any(axis), OVERFLOW, out)


def depth_time_grid(values: np.ndarray, steps: np.ndarray, max_columns: int = MAX_COLUMNS,
                    max_rows: int = MAX_ROWS, expand: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The map: ``(grid, column_edges, row_edges)``. ``values`` float [T, B] (T records, B blocks), ``steps`` [T]
    (increasing).

    ``grid`` float64 [R, C]: R = min(B, max_rows) rows (row r: blocks row_edges[r] .. row_edges[r+1] - 1, their mean
    log10) and C = max_columns columns of equal width from steps[0] to steps[-1] (``column_edges`` [C + 1], in
    steps; one column for a single record). A column shows the record nearest its centre when there are at most
    half as many records as columns, else the mean log10 of the records inside it. Cells are log10 values
    (:func:`_log_mean`: -inf all 0, +inf one not finite, NaN no record). ``expand=False`` (the explorer, which
    places columns by their edges): at most ``max_columns`` records are one column each, their edges half-way
    between records (the first and last at the records)."""
    values = np.asarray(values, np.float64)
    steps = np.asarray(steps, np.float64)
    if values.ndim != 2 or values.shape[0] != len(steps) or not values.size:
        raise ValueError(f"values must be [records, blocks] with one step per record; got {values.shape}, "
                         f"{len(steps)} steps")
    rows = _bins(values.shape[1], max_rows)
    by_row = np.stack([_log_mean(values[:, a:b], axis=1) for a, b in zip(rows[:-1], rows[1:])], axis=1)  # [T, R]
    first, last = float(steps[0]), float(steps[-1])
    if last <= first:  # one record (or one step recorded several times): one column
        return _log_mean_logs(by_row)[:, None], np.array([first, first + 1.0]), rows
    if not expand and len(steps) <= max_columns:
        return by_row.T, np.concatenate([[first], (steps[:-1] + steps[1:]) / 2, [last]]), rows
    edges = np.linspace(first, last, max_columns + 1)
    if 2 * len(steps) <= max_columns:
        centres = (edges[:-1] + edges[1:]) / 2
        nearest = np.abs(steps[None, :] - centres[:, None]).argmin(1)
        return by_row.T[:, nearest], edges, rows
    column = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, max_columns - 1)
    grid = np.full((by_row.shape[1], max_columns), np.nan)
    for c in range(max_columns):
        members = by_row[column == c]
        if len(members):
            grid[:, c] = _log_mean_logs(members)
    return grid, edges, rows


def _log_mean_logs(logs: np.ndarray) -> np.ndarray:
    """Mean over records (axis 0) of cells that are log10 already, with the markers of :func:`_log_mean`."""
    finite = np.isfinite(logs)
    count = finite.sum(0)
    out = np.where(count > 0, np.where(finite, logs, 0.0).sum(0) / np.maximum(count, 1), np.nan)
    out = np.where((count == 0) & (logs == UNDERFLOW).any(0), UNDERFLOW, out)
    return np.where((logs == OVERFLOW).any(0), OVERFLOW, out)


def grid_colors(grid: np.ndarray, low: float, high: float, background, warn) -> np.ndarray:
    """uint8 [R, C, 4] RGBA of ``grid`` (log10 values): :data:`VIRIDIS` from ``low`` to ``high`` (clipped), the
    lowest colour for an underflow, ``warn`` for a non-finite value, ``background`` for no record."""
    stops = np.stack([to_rgb(c) for c in VIRIDIS])
    t = np.clip((np.nan_to_num(grid, nan=low, posinf=high, neginf=low) - low) / ((high - low) or 1.0), 0, 1)
    position = t * (len(VIRIDIS) - 1)
    index = np.minimum(position.astype(int), len(VIRIDIS) - 2)
    frac = (position - index)[..., None]
    rgb = stops[index] * (1 - frac) + stops[index + 1] * frac
    rgb = np.where(np.isnan(grid)[..., None], to_rgb(background), rgb)
    rgb = np.where((grid == OVERFLOW)[..., None], to_rgb(warn), rgb)
    out = np.empty(grid.shape + (4,), np.uint8)
    out[..., :3] = np.round(rgb * 255)
    out[..., 3] = 255
    return out


def _cut_to(name: str, max_chars: int, room: float, color) -> Mobject:
    """``name`` at the house's small size, cut in the middle (:func:`middle_ellipsis`) to ``max_chars`` characters,
    and shorter (by 4 at a time, 4 at least) where it is still wider than ``room`` (scene units): the block names and
    their heading left of the map stay inside the frame's margin whatever the user's module names."""
    for limit in range(max_chars, 3, -4):
        text = make_text(middle_ellipsis(name, limit), size=SIZE_SMALL, color=color)
        if text.width <= room:
            break
    return text


def label_rows(blocks: int, limit: int = MAX_LABELS, apart: int = 1) -> list[int]:
    """Which blocks get their name beside the map: the first, the last and evenly between, at most ``limit``, each
    at least ``apart`` rows from the next (a name is taller than a row of a deep map)."""
    count = min(blocks, limit)
    while count > 2 and (blocks - 1) / (count - 1) < apart:  # evenly spread, as many as fit
        count -= 1
    picks = sorted(set(np.linspace(0, blocks - 1, count).round().astype(int).tolist()))
    kept: list[int] = []  # (rounding can bring two a row closer)
    for row in picks:
        if not kept or row - kept[-1] >= apart:
            kept.append(row)
    if kept[-1] != blocks - 1:  # the last block is always named: it takes the place of a pick too close to it
        if len(kept) > 1 and blocks - 1 - kept[-1] < apart:
            kept[-1] = blocks - 1
        else:
            kept.append(blocks - 1)
    return kept


def color_scale(grid: np.ndarray, decades: int) -> tuple[int, int]:
    """(low, high): the whole decades the colours span, ``high`` the ceiling of the largest finite cell, ``low`` the
    floor of the smallest but at most ``decades`` below ``high`` (and at least one)."""
    finite = grid[np.isfinite(grid)]
    high = math.ceil(float(finite.max())) if finite.size else 0
    low = max(math.floor(float(finite.min())) if finite.size else high - 1, high - int(decades))
    return min(low, high - 1), high


def loss_axis(loss: np.ndarray) -> tuple[bool, float, float, list[float]]:
    """``(log, start, end, ticks)`` of the loss chart for the values drawn, ``loss`` [n] (NaN: a gap): where every
    finite value is positive and the largest is more than ten times the smallest, a log10 axis in whole decades
    (``start``, ``end`` and ``ticks`` are exponents: floor and ceiling of log10 of the smallest and the largest);
    otherwise a linear one around the values (:func:`scenes.kit.widgets.nice_axis`: the values fill most of it,
    its ticks round real values); 0 to 1 where no value is finite."""
    finite = np.asarray(loss, np.float64)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return False, 0.0, 1.0, [0.0, 0.5, 1.0]
    low, high = float(finite.min()), float(finite.max())
    if low > 0 and high > 10 * low:
        start, end = math.floor(math.log10(low) + 1e-12), math.ceil(math.log10(high) - 1e-12)
        return True, float(start), float(end), [float(e) for e in tick_exponents(start, end, 4)]
    return (False, *nice_axis(low, high))


def loss_line(steps: np.ndarray, loss: np.ndarray, limit: int = MAX_LOSS_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of the loss line: every step, or the mean of equal step bins (NaN bins stay NaN: a gap)."""
    if len(loss) <= limit:
        return steps.astype(np.float64), loss.astype(np.float64)
    edges = _bins(len(loss), limit)
    with np.errstate(invalid="ignore"):
        xs = np.array([steps[a:b].mean() for a, b in zip(edges[:-1], edges[1:])])
        ys = np.array([np.nanmean(loss[a:b]) if np.isfinite(loss[a:b]).any() else np.nan
                       for a, b in zip(edges[:-1], edges[1:])])
    return xs, ys


class DepthTimeMap(UserModelScene):
    """‖∂L/∂h‖ of every residual block at every recorded step of your network, as one map, with the loss beneath."""

    needs_runs = (RESIDUAL,)
    required_arrays = ("step", "out_grad_norm", "loss_curve")
    decades = 12  # the colour scale spans at most this many powers of ten below the largest value
    param_limits = {"decades": (1, 40)}
    _source = "He et al. 2016, eq. 4-5"  # the gradient through the blocks' additions (the explorer cites it)
    _map_box = (-3.9, 4.5, 2.15, -0.95)  # left, right, top, bottom of the map (scene units)

    def setup(self) -> None:
        super().setup()
        draw_images_on_pillow()

    def construct(self) -> None:
        trace = self.traces[RESIDUAL]
        values = np.asarray(trace["out_grad_norm"], np.float64)
        steps = np.asarray(trace["step"], np.float64)
        records, blocks = values.shape
        grid, edges, rows = depth_time_grid(values, steps)
        low, high = color_scale(grid, self.decades)
        self.number("blocks", blocks, 6)
        self.number("records", records, 6)
        self.number("scale.low_exponent", low, 6)
        self.number("scale.high_exponent", high, 6)
        for l in range(blocks):
            self.number(f"block.{l}.first_record.out_grad_norm", values[0, l])
            self.number(f"block.{l}.last_record.out_grad_norm", values[-1, l])
        ratio = values[-1, 0] / values[-1, -1] if values[-1, -1] > 0 else np.nan
        shown_ratio = self.number("last_record.first_over_last", ratio)

        # 1. Title and what the picture holds.
        title = self.title("title")
        curve = np.asarray(trace["loss_curve"], np.float64)
        # a watched run killed (or still recording) before its close is said so: its steps are those it had taken
        complete = (getattr(trace.meta, "watch", None) or {}).get("complete", True) is not False
        self.number("run_complete", float(complete), 6)
        subtitle = self.text("subtitle" if complete else "subtitle_unfinished", size=SIZE_SMALL,
                             color=PALETTE["muted"], blocks=blocks, records=records, steps=len(curve))
        subtitle.next_to(title, DOWN, buff=0.12)
        self.narrate("n_intro", 3.5)
        self.play(FadeIn(title), FadeIn(subtitle), run_time=1.2)

        # 2. The map, its block names and its colour bar.
        left, right, top, bottom = self._map_box
        image = ImageMobject(grid_colors(grid, low, high, PALETTE["background"], PALETTE["warn"]))
        image.set_resampling_algorithm(RESAMPLING_ALGORITHMS["nearest"])
        image.stretch_to_fit_width(right - left).stretch_to_fit_height(top - bottom)
        image.move_to([(left + right) / 2, (top + bottom) / 2, 0])
        frame = Rectangle(width=right - left, height=top - bottom, color=PALETTE["muted"], stroke_width=1.5)
        frame.move_to(image)
        names = self.block_name_labels(rows, top, bottom, left)
        bar = self.color_bar(low, high, right + 0.25, top, bottom)
        self.narrate("n_map", 4)
        self.play(FadeIn(image), Create(frame), FadeIn(names), FadeIn(bar), run_time=1.5)

        # 3. The loss beneath, on the same step axis.
        shown = curve[: int(edges[-1]) + 1]  # the steps the map spans (a loop runs on past its last record)
        xs, ys = loss_line(np.arange(len(shown), dtype=np.float64), shown)
        for x, y in zip(xs, ys):
            self.number(f"loss.step.{x:g}", y)
        log, y0, y1, y_ticks = loss_axis(ys)  # around the losses drawn (log where they span more than a decade)
        self.number("loss_axis.log", int(log), 6)
        self.number("loss_axis.low", 10.0 ** y0 if log else y0)
        self.number("loss_axis.high", 10.0 ** y1 if log else y1)
        x0, x1 = float(edges[0]), float(edges[-1])
        # drawn from y0 up (Manim's Axes put the x axis through y = 0 wherever 0 lies inside the range)
        label = (lambda v: power_of_ten(round(v + y0))) if log else (lambda v: f"{round(v + y0, 12):g}")
        chart = LinearAxes((x0, x1), (0.0, y1 - y0), width=right - left, height=1.45,
                           x_ticks=[t for t in nice_ticks(x0, x1, 6) if float(t).is_integer()],
                           y_ticks=[t - y0 for t in y_ticks], y_format=label)
        chart.shift([left - chart.axes.get_left()[0], bottom - 0.45 - chart.axes.get_top()[1], 0])
        loss_label = self.text("loss_axis", size=SIZE_SMALL, color=PALETTE["muted"])
        loss_label.next_to(chart.axes, RIGHT, buff=0.25).align_to(chart.axes, UP)
        step_label = self.text("axis_step", size=SIZE_SMALL, color=PALETTE["muted"])
        step_label.next_to(chart.axes, RIGHT, buff=0.25).align_to(chart.axes, DOWN)
        line = chart.polyline(xs, (safe_log10(ys) if log else ys) - y0, color=PALETTE["text"], stroke_width=3,
                              what="loss")
        self.narrate("n_loss", 3)
        self.play(Create(chart), FadeIn(loss_label), FadeIn(step_label), run_time=0.8)
        self.play(Create(line, rate_func=linear), run_time=2.5)

        # 4. One measured reading of the last record.
        key = "verdict" if np.isfinite(ratio) else "verdict_missing"
        # the end blocks named as the other Model* scenes name one block (short_name: "h.0", "layer4.2"), never
        # by what is left after the shared prefix ("0" says nothing without the labels' heading)
        verdict = self.verdict(key, ratio=shown_ratio, step=int(steps[-1]))
        verdict.to_edge(DOWN, buff=0.3).to_edge(LEFT, buff=0.5)
        self.narrate("n_verdict", 3)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.0)
        self.wait(3)

    def verdict(self, key: str, **fmt) -> Mobject:
        """The one-line reading under the chart, naming the end blocks (:func:`short_name`, at most 16 characters
        each); where long names would carry it past the margin, they are cut shorter (12, then 8 characters), and
        only then is the line wrapped. The size never drops."""
        first, last = self.block_names[0], self.block_names[-1]
        room = line_width() - 0.1  # (it starts 0.5 from the left edge, not at the margin)
        # a bare index (an nn.Sequential's children: "0" ... "4") is said as a block ("block 0 (first)"), not "0 (first)"
        said = lambda name: self.t("numbered_block", index=name) if name.isdigit() else name
        for limit in (16, 12, 8):
            names = {"first": said(short_name(first, limit)), "last": said(short_name(last, limit))}
            verdict = self.text(key, size=SIZE_LABEL, **fmt, **names)
            if verdict.width <= room:
                return verdict
        return self.wrapped(key, size=SIZE_LABEL, width=room, **fmt, **names)

    def block_name_labels(self, rows: np.ndarray, top: float, bottom: float, left: float) -> VGroup:
        """The names of some blocks (:func:`label_rows`) left of the map, each at its row's centre, with the shared
        prefix as a heading above them; a label for a row that holds several blocks names its first."""
        names = list(self.block_names)
        prefix, rests = split_prefix(names)
        room = left - (MARGIN - 0.5) * config.frame_width  # from the frame's margin to the map's left edge
        row_height = (top - bottom) / (len(rows) - 1)
        group = VGroup()
        for apart in range(1, len(rows)):  # names a row apart while they clear each other, else fewer names
            picks = label_rows(len(rows) - 1, apart=apart)
            labels = [_cut_to(rests[int(rows[r])], 16, room - 0.2, PALETTE["muted"]) for r in picks]
            gaps = [(b - a) * row_height - (upper.height + lower.height) / 2
                    for a, b, upper, lower in zip(picks, picks[1:], labels, labels[1:])]
            if min(gaps, default=1.0) >= LABEL_GAP:
                break
        for r, label in zip(picks, labels):
            y = top - (r + 0.5) * row_height
            label.move_to([left - 0.2 - label.width / 2, y, 0])
            group.add(label, Line([left - 0.12, y, 0], [left, y, 0], color=PALETTE["muted"], stroke_width=1.5))
        heading = _cut_to(prefix.rstrip(".") or self.t("blocks_axis"), 18, room, PALETTE["text"])
        heading.next_to([left - 0.2, top, 0], UP, buff=0.1).align_to(group, RIGHT)
        # clear of the first name too, where that is taller than its row (a deep map) and reaches up to the heading
        heading.shift(max(0.0, group.get_top()[1] + HEADING_GAP - heading.get_bottom()[1]) * UP)
        return group.add(heading)

    def color_bar(self, low: int, high: int, x: float, top: float, bottom: float) -> Group:
        """A vertical bar of the colour scale, 10^low at the bottom to 10^high at the top, labelled at whole
        decades (at most 7 labels)."""
        steps = 128
        column = np.linspace(high, low, steps)[:, None]
        image = ImageMobject(grid_colors(column, low, high, PALETTE["background"], PALETTE["warn"]))
        image.set_resampling_algorithm(RESAMPLING_ALGORITHMS["nearest"])
        image.stretch_to_fit_width(0.28).stretch_to_fit_height(top - bottom)
        image.move_to([x + 0.14, (top + bottom) / 2, 0])
        group = VGroup()
        every = max(1, math.ceil((high - low) / 6))
        for exp in range(high, low - 1, -every):
            y = bottom + (exp - low) / (high - low) * (top - bottom)
            label = make_text(power_of_ten(exp), size=SIZE_SMALL, color=PALETTE["muted"])
            group.add(label.move_to([x + 0.4 + label.width / 2, y, 0]))
        heading = self.text("color_axis", size=SIZE_SMALL, color=PALETTE["text"])
        heading.next_to([x + 0.14, top, 0], UP, buff=0.1)
        heading.shift(min(0.0, 6.9 - heading.get_right()[0]) * RIGHT)
        return Group(image, group, heading)
