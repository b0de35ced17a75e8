"""GradientFlowOverTraining: the backward signal as a pulse running from the loss to the input, block by block.

Example::

    python render.py render GradientFlowOverTraining --quality h --format png     # a 1080p still
    python render.py render GradientFlowOverTraining --set GradientFlowOverTraining.shown_depth=56

Both nets of the ``vanishing`` experiment at one depth (default 20 sigmoid blocks) are drawn as rows of
their real blocks, the residual one with its identity lane beside them. A pulse leaves the loss and travels
to the input; at every block its brightness and width follow the recorded ||dL/dh_l|| (``out_grad_norm``) on
one log scale shared by both nets. In the plain sigmoid net it fades within a few blocks (sigma' <= 1/4 per
layer); in the residual net it runs the whole way along the lane, because
dL/dh_l = dL/dh_L (1 + d/dh_l sum F) (He et al. 2016, eq. 4-5). Then the same picture is played across
every recorded training step, with a step counter. Source: He et al. 2015 §1; He et al. 2016, eq. 5.
"""

from __future__ import annotations

import math

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Circle, Create, Dot, FadeIn, FadeOut, Line, Rectangle, RoundedRectangle,
                   Transform, ValueTracker, VGroup, VMobject, config, linear)

from scenes.kit.base import LectureScene
from scenes.kit.layout import MARGIN
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, power_of_ten
from scenes.kit.helpers import is_missing, steps_run
from scenes.kit.frame_cost import Restyle, draw_first
from scenes.kit.widgets import GapMark, LogAxes, axes_gap, gapped_polyline, log_floor_exponent
from simulation.summary import blown_up_losses

__all__ = ["GradientFlowOverTraining", "flow_scale", "MIN_DECADES", "brightness", "value_along", "pick_flow_runs",
           "last_step_run", "plain_end_line", "LIT"]


MIN_DECADES = 2  # the log scale spans at least this many decades: a run whose norms lie within one still reads


def flow_scale(grads: list[np.ndarray], decades: int = 40, min_decades: int = MIN_DECADES) -> tuple[int, int]:
    """(bottom, top): the whole decades the finite positive values of every array in ``grads`` hold, the log scale
    they share (integer exponents of 10).

    ``top`` is the ceiling of log10 of the largest value and ``bottom`` the floor of log10 of the smallest, so every
    measured value lies on the scale; the span ``top - bottom`` is at most ``decades`` (smaller values draw dark, as
    an exact 0 does) and at least ``min(min_decades, decades)``, widened downwards (a flat run's values draw bright,
    not as the two ends of the bar). Raises ValueError when no value is finite and positive (nothing to draw)."""
    values = np.concatenate([np.asarray(g, dtype=np.float64).ravel() for g in grads])
    positive = values[np.isfinite(values) & (values > 0)]
    if positive.size == 0:
        raise ValueError("no finite positive gradient norm to draw")
    top = int(math.ceil(math.log10(float(positive.max())) - 1e-12))
    bottom = int(math.floor(math.log10(float(positive.min())) + 1e-12))
    span = min(max(top - bottom, min(int(min_decades), int(decades))), int(decades))
    return top - span, top


def brightness(values: np.ndarray | float, bottom: float, top: float) -> np.ndarray:
    """Position of ``values`` on the log scale [10**bottom, 10**top], clipped to [0, 1]; 0 for zero,
    negative or non-finite values (an underflow or a diverged run draws dark)."""
    arr = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(arr) & (arr > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = (np.log10(np.where(ok, arr, 1.0)) - bottom) / float(top - bottom)
    return np.where(ok, np.clip(level, 0.0, 1.0), 0.0)


def value_along(levels: np.ndarray, xs: np.ndarray, x: float, present: np.ndarray | None = None) -> float:
    """Level at scene position ``x`` on a row whose block ``l`` sits at ``xs[l]`` (increasing): linear
    between neighbouring blocks, the end block's level beyond either end. ``present`` [depth] (bool):
    only those blocks are interpolated between (a missing value is not a dark block); 0 when none is."""
    if present is not None and not present.all():
        if not present.any():
            return 0.0
        return float(np.interp(x, xs[present], levels[present]))
    return float(np.interp(x, xs, levels))


def last_step_run(trace, last_recorded: int) -> int:
    """The index of the last optimiser step ``trace``'s run took: the last recorded step, or later where its
    per-step ``loss_curve`` runs on (a watched loop of 30 steps recorded every 5: records end at step 25, the run at
    29). Built-in runs record their last step, so for them it is the last record."""
    if "loss_curve" not in trace.arrays:
        return last_recorded
    return max(last_recorded, steps_run(trace, len(trace["loss_curve"])) - 1)


LIT = 0.05  # a block drawn at this level of the log scale or above is lit (the narration says it gets a gradient)


def plain_end_line(start: float, end: float, start_level: float, end_level: float) -> str:
    """The key of the line that closes the plain net's story: its first block's ‖∂L/∂h‖ at the first and the last
    record (``start``, ``end``) and the levels they are drawn at (:func:`brightness`). Dark at step 0: it lights
    up or stays dark; lit at step 0 (a shallow twin): it stays lit or goes dark. Not "lights up ... too" for a
    block lit from the start, as a new user's 6-block twin heard (its ratio had fallen, 5.4e-4 to 3.8e-4)."""
    if is_missing(end):
        return "n_end_missing"
    dark = end_level < LIT
    if is_missing(start) or start_level < LIT:
        return "n_plain_stays_dark" if dark else "n_plain_lights_up"
    return "n_plain_goes_dark" if dark else "n_plain_stays_lit"


def pick_flow_runs(traces: dict, depth: int, activation: str) -> tuple[str, str]:
    """Names of the plain and the residual run with ``activation`` whose depth is nearest ``depth``
    (the deeper one on a tie). Raises ValueError when either architecture is missing."""
    found = {}
    for name, trace in traces.items():
        cfg = trace.run_config
        if getattr(cfg, "activation", None) != activation or getattr(cfg, "arch", None) not in ("plain", "residual"):
            continue
        found.setdefault(cfg.depth, {})[cfg.arch] = name
    both = [d for d, runs in found.items() if len(runs) == 2]
    if not both:
        raise ValueError(f"need a plain and a residual {activation} run of one depth; got {sorted(traces)}")
    best = min(both, key=lambda d: (abs(d - depth), -d))
    return found[best]["plain"], found[best]["residual"]


class GradientFlowOverTraining(LectureScene):
    """The backward pulse through a plain and a residual sigmoid net, at step 0 and across training."""

    experiment = "vanishing"
    shown_depth: int = 20  # depth of the two nets drawn (the nearest depth the experiment ran)
    activation: str = "sigmoid"
    decades: int = 40  # the log scale spans the decades the drawn ||dL/dh_l|| hold, at most this many (flow_scale)
    faded_ratio: float = 1e-3  # the plain pulse "fades" where its input end gets less than this of its loss end
    param_limits = {"shown_depth": (1, 1000), "activation": ("sigmoid", "tanh", "relu"), "decades": (1, 40)}

    _row_y = {"plain": 1.1, "residual": -0.65}  # centre y of each row's blocks (scene units)
    _lane_drop = 0.78  # the residual row's identity lane runs this far below its blocks
    _x_span = (-5.0, 5.2)  # x of the first block's left edge and the last block's right edge
    _source = "He et al. 2015, §1; He et al. 2016, eq. 4-5"

    def construct(self) -> None:
        runs = self.flow_runs()  # (plain, residual), or (residual,) alone: a user's network without its twin
        names = dict(zip(("plain", "residual") if len(runs) == 2 else ("residual",), runs))
        ref = next(iter(names))  # the run whose steps the counter and the history follow
        traces = {arch: self.traces[name] for arch, name in names.items()}
        grads = {arch: np.asarray(t["out_grad_norm"], dtype=np.float64) for arch, t in traces.items()}  # [T, depth]
        depth = grads[ref].shape[1]
        steps = {arch: np.asarray(t["step"]) for arch, t in traces.items()}
        records = min(len(s) for s in steps.values())
        bottom, top = flow_scale([g[:records] for g in grads.values()], self.decades)
        self.number("scale.log10_bottom", bottom)
        self.number("scale.log10_top", top)
        self.number("scale.decades", top - bottom)
        for arch, name in names.items():
            for k in range(records):
                for l in range(depth):
                    self.number(f"{name}.step.{int(steps[arch][k])}.block.{l}.out_grad_norm", grads[arch][k, l])
        levels = {arch: brightness(g[:records], bottom, top) for arch, g in grads.items()}
        self._present = {arch: ~np.isnan(g[:records]) for arch, g in grads.items()}  # [records, depth]
        self._gap_names = names
        ratios = {arch: g[:records, 0] / g[:records, -1] for arch, g in grads.items()}

        # 1. Title, the two rows of real blocks, the residual row's identity lane.
        title = self.title("title")
        subtitle = self.text("subtitle", size=SIZE_SMALL, color=PALETTE["muted"], depth=depth, act=self.activation)
        subtitle.next_to(title, DOWN, buff=0.12)
        self._x_span = self._measured_span()
        rows = {arch: self._make_row(arch, depth) for arch in names}
        names_drawn = self.row_labels(rows[ref])  # what the blocks are called (a user model's module paths)
        self.narrate(self.intro_key, 3.5)
        self.play(FadeIn(title), FadeIn(subtitle), run_time=1)
        self.play(*[FadeIn(rows[arch]["frame"]) for arch in rows], *[FadeIn(m) for m in names_drawn], run_time=1.5)
        scale_bar = self._make_scale_bar(bottom, top)
        readouts = {arch: self._readout(arch, names[arch], ratios[arch][0], int(steps[arch][0])) for arch in rows}
        self.play(FadeIn(scale_bar), run_time=0.6)

        # 2. Step 0: the pulse leaves the loss and runs to the input, plain net first.
        for arch in names:
            if arch == "plain":
                self.narrate("n_plain_missing" if is_missing(grads["plain"][0, 0])
                             else "n_plain_fades" if ratios["plain"][0] < self.faded_ratio else "n_plain_survives", 4.2)
            else:
                self.narrate("n_residual_missing" if is_missing(ratios["residual"][0])
                             else "n_residual_runs" if ratios["residual"][0] >= 0.1 else "n_residual_fades", 4.2)
            self._run_pulse(rows[arch], levels[arch][0], self._present[arch][0])
            self._show_gaps(rows[arch], 0, int(steps[arch][0]))
            self.play(FadeIn(readouts[arch]), run_time=0.5)
        self.wait(0.8)

        # 3. Every recorded step: the lit rows follow the trace; a counter says which step.
        last = last_step_run(traces[ref], int(steps[ref][records - 1]))
        counter = self.text("step", size=SIZE_LABEL, step=self.number("shown_step.0", steps[ref][0]),
                            last=self.number("last_step", last))
        counter.next_to(subtitle, DOWN, buff=0.15)
        history = self._make_history(ratios, steps, records)
        self.narrate("n_training", 3)
        self.play(FadeIn(counter), FadeIn(history["frame"]), run_time=0.5)
        # the still parts are drawn once per play, not at every frame (scenes/kit/frame_cost.py: no pixel changes)
        draw_first(self, title, subtitle, scale_bar, history["frame"], *names_drawn,
                   *[m for arch in rows for m in rows[arch]["still"]])
        per_record = min(0.45, 9.0 / max(records - 1, 1))
        for k in range(1, records):
            step = int(steps[ref][k])
            new_counter = self.text("step", size=SIZE_LABEL, step=self.number(f"shown_step.{k}", step),
                                    last=last).move_to(counter)
            new_readouts = {arch: self._readout(arch, names[arch], ratios[arch][k], step) for arch in rows}
            targets = [m for arch in rows for m in self._lit_targets(rows[arch], levels[arch][k])]
            self._grow_history(history, ratios, steps, k)
            for arch in rows:
                self._show_gaps(rows[arch], k, step)
            self.play(*targets, Transform(counter, new_counter),
                      *[Transform(readouts[arch], new_readouts[arch]) for arch in rows],
                      run_time=per_record, rate_func=linear)
        if "plain" in names:
            # lit or dark read from the ratio, not from the colour scale (the run's own decades: its smallest
            # value is always drawn at level 0)
            lit = [float(ratios["plain"][k] >= self.faded_ratio) for k in (0, records - 1)]
            self.narrate(plain_end_line(grads["plain"][0, 0], grads["plain"][records - 1, 0], *lit), 4)
        for arch in [a for a in ("residual", "plain") if a in names]:  # a finite run that did not train is said so
            blown = blown_up_losses(traces[arch])
            if blown is not None:
                self.narrate(f"n_{arch}_blew_up", 5, start=self.number(f"{names[arch]}.initial_loss", blown[0]),
                             end=self.number(f"{names[arch]}.final_train_loss_avg", blown[1]))
        self.cite(self._source)
        self.wait(3.5)

    # -- what a variant changes -------------------------------------------------------------------------
    scale_caption = "scale"  # the key of the scale bar's caption (a variant drawing one net says so)
    intro_key = "n_intro"  # the key of the first narration line (a variant drawing one net says so)

    def flow_runs(self) -> tuple[str, ...]:
        """Names of the plain and the residual run drawn (keys of ``self.traces``); a variant may give the residual
        run alone (one row)."""
        return pick_flow_runs(self.traces, self.shown_depth, self.activation)

    def row_labels(self, plain_row: dict) -> list:
        """Mobjects that name the blocks (placed, not yet added); the built-in nets' blocks need none."""
        return []

    # -- drawing ----------------------------------------------------------------------------------------
    def _make_row(self, arch: str, depth: int) -> dict:
        """The row of ``depth`` blocks of one net: its frame (blocks, wires, labels), the parts the pulse
        lights (block fills, wire or lane segments) and the block centres' x [depth]."""
        x0, x1 = self._x_span
        slot = (x1 - x0) / depth
        xs = x0 + slot * (np.arange(depth) + 0.5)
        y = self._row_y[arch]
        color = PALETTE[arch]
        block_w, block_h = min(0.7 * slot, 0.42), 0.62 if arch == "plain" else 0.5
        path_y = y if arch == "plain" else y - self._lane_drop  # where the signal travels
        in_x, out_x = x0 - 0.55, x1 + 0.55
        frame, fills, segments = VGroup(), VGroup(), VGroup()
        # the path the gradient takes: through the blocks (plain) or along the identity lane (residual)
        bounds = np.concatenate([[in_x], x0 + slot * np.arange(1, depth), [out_x]])
        base = Line([in_x, path_y, 0], [out_x, path_y, 0], stroke_width=6 if arch == "residual" else 2,
                    color=PALETTE["identity"] if arch == "residual" else PALETTE["muted"],
                    stroke_opacity=0.45 if arch == "residual" else 0.7)
        for l in range(depth):
            seg = Line([bounds[l], path_y, 0], [bounds[l + 1], path_y, 0], color=PALETTE["grad"], stroke_width=0,
                       stroke_opacity=0)
            segments.add(seg)
        segments.opacity_is_data = True  # dim where ||dL/dh_l|| is small (tests/theme_checks.py reads this)
        frame.add(base, segments)  # lit segments lie on the wire, under the blocks
        for l, x in enumerate(xs):
            block = RoundedRectangle(corner_radius=min(0.08, block_w / 4), width=block_w, height=block_h,
                                     stroke_color=color, stroke_width=2.5, fill_color=PALETTE["background"],
                                     fill_opacity=1).move_to([x, y, 0])
            fill = Rectangle(width=block_w * 0.78, height=block_h * 0.78, stroke_width=0, fill_color=PALETTE["grad"],
                             fill_opacity=0).move_to([x, y, 0])
            if arch == "residual":  # the branch F leaves the lane, runs through the block and rejoins it
                left, right = x - slot / 2 + 0.03, x + slot / 2 - 0.03
                frame.add(Line([left, path_y, 0], [x - block_w / 2, y - block_h / 2, 0], color=PALETTE["branch"],
                               stroke_width=2),
                          Line([x + block_w / 2, y - block_h / 2, 0], [right, path_y, 0], color=PALETTE["branch"],
                               stroke_width=2),
                          Dot([right, path_y, 0], radius=0.035, color=PALETTE["identity"]))
            frame.add(block)
            fills.add(fill)
        ends = VGroup(self._end_node("input", in_x - 0.2, path_y, LEFT), self._end_node("loss", out_x + 0.2, path_y,
                                                                                           RIGHT))
        label = self.text(f"{arch}_row", size=SIZE_LABEL, color=color)
        label.move_to([x0, y + block_h / 2 + 0.32, 0], aligned_edge=LEFT)
        frame.add(ends, label)
        if arch == "residual":
            lane = self.text("lane", size=SIZE_SMALL, color=PALETTE["identity"])
            lane.move_to([x1, path_y - 0.3, 0], aligned_edge=RIGHT)
            frame.add(lane)
        frame.add(fills)  # inside the blocks
        still = [base, ends, label, *([lane] if arch == "residual" else [])]  # never animated after the fade-in
        return {"arch": arch, "frame": frame, "still": still, "fills": fills, "segments": segments, "xs": xs, "path_y": path_y,
                "in_x": in_x, "out_x": out_x, "y": y, "block": (block_w, block_h), "gaps": None}

    def _show_gaps(self, row: dict, k: int, step: int) -> None:
        """A labelled GapMark over every block of ``row`` whose ||dL/dh_l|| is missing at record ``k``
        (drawn unlit, never as a dark 0); the marks of the record before are taken away."""
        present = self._present[row["arch"]][k]
        if row["gaps"] is None and present.all():
            return  # nothing missing in this row so far: the frames are those of an intact trace
        if row["gaps"] is not None:
            self.remove(row["gaps"])
        width, height = row["block"]
        name = self._gap_names[row["arch"]]
        row["gaps"] = VGroup(*[GapMark(width, height, f"{name}.out_grad_norm[step {step}, block {l}]")
                               .move_to([row["xs"][l], row["y"], 0]) for l in np.flatnonzero(~present)])
        self.add(row["gaps"])

    def _make_history(self, ratios: dict[str, np.ndarray], steps: dict[str, np.ndarray], records: int) -> dict:
        """A small log chart (bottom right) of each net's input-end / loss-end ratio against the step;
        its curves grow with the step counter. Underflows (0) sit on the floor."""
        values = np.concatenate([r[:records] for r in ratios.values()])
        exp_min = min(-1, log_floor_exponent(values, margin=0))
        exp_max = max(1, int(np.ceil(np.log10(np.nanmax(np.where(values > 0, values, np.nan)))))) \
            if np.any(values > 0) else 1
        last = float(max(int(next(iter(steps.values()))[records - 1]), 1))
        chart = LogAxes((0, last, last), (exp_min, exp_max), width=4.4, height=1.0)
        labels = list(chart.ticks)[0::2]  # LogAxes.ticks: label, grid line, label, grid line ...
        chart.ticks.remove(*labels[1:-1])  # the bottom and top labels only: the chart is small
        chart.move_to([1.7, -2.85, 0])
        caption = self.text("history", size=SIZE_SMALL, color=PALETTE["muted"])
        caption.next_to(chart.axes, UP, buff=0.1).align_to(chart.axes, LEFT)
        curves = {arch: VMobject(color=PALETTE[arch], stroke_width=3) for arch in ratios}
        gaps = {arch: VGroup() for arch in ratios}  # labelled gaps where a ratio is missing
        for arch, curve in curves.items():
            point = chart.point(0, ratios[arch][0])
            if point is None:  # missing: an invisible point, and a labelled gap
                point = chart.axes.c2p(0, 0)
                gaps[arch].add(axes_gap(chart.axes, [0.0], 0, 1, f"{self._gap_names[arch]}.first_over_last[0]"))
            curve.set_points_as_corners([point, point])
        frame = VGroup(chart, caption, *curves.values(), *gaps.values())
        return {"frame": frame, "chart": chart, "curves": curves, "gaps": gaps}

    def _grow_history(self, history: dict, ratios: dict[str, np.ndarray], steps: dict[str, np.ndarray],
                      k: int) -> None:
        """Extend each curve of the history chart to record ``k``."""
        for arch, curve in history["curves"].items():
            points = [history["chart"].point(float(steps[arch][j]), ratios[arch][j]) for j in range(k + 1)]
            if all(p is not None for p in points):
                curve.set_points_as_corners(points)
                continue
            xs = [float(steps[arch][j]) for j in range(k + 1)]
            what = f"{self._gap_names[arch]}.first_over_last"
            drawn = gapped_polyline(points, curve.get_color(), 3,
                                    gap_box=lambda a, b: axes_gap(history["chart"].axes, xs, a, b, what))
            curve.set_points(drawn.points)
            history["gaps"][arch].remove(*history["gaps"][arch].submobjects)
            history["gaps"][arch].add(*[m for m in drawn.submobjects if isinstance(m, GapMark)])

    _end_room = 0.55 + 0.2 + 0.07 + 0.1  # from the blocks' span to an end label's near edge: wire, dot, its buff

    def _measured_span(self) -> tuple[float, float]:
        """The blocks' span (:attr:`_x_span`), narrowed where an end label ("input", "loss" in this language) would
        reach into the frame's margin: the label then sits beside its dot, never pushed onto it."""
        half = config.frame_width / 2 - MARGIN * config.frame_width
        widths = [self.text(key, size=SIZE_SMALL).width for key in ("input", "loss")]
        x0, x1 = type(self)._x_span
        return max(x0, -half + widths[0] + self._end_room), min(x1, half - widths[1] - self._end_room)

    def _end_node(self, key: str, x: float, y: float, side) -> VGroup:
        dot = Dot([x, y, 0], radius=0.07, color=PALETTE["text"])
        label = self.text(key, size=SIZE_SMALL, color=PALETTE["muted"]).next_to(dot, side, buff=0.1)
        return VGroup(dot, label)

    def _make_scale_bar(self, bottom: int, top: int) -> VGroup:
        """A strip from dark (10**bottom and below) to bright (10**top), labelled with the two ends of the range the
        trace holds (:func:`flow_scale`)."""
        cells = VGroup(*[Rectangle(width=0.16, height=0.22, stroke_width=0, fill_color=PALETTE["grad"],
                                   fill_opacity=self._fill_opacity(k / 19)) for k in range(20)])
        cells.arrange(RIGHT, buff=0)
        frame = Rectangle(width=cells.width, height=cells.height, stroke_color=PALETTE["muted"], stroke_width=1)
        frame.move_to(cells)
        low = make_text(power_of_ten(bottom), size=SIZE_SMALL, color=PALETTE["muted"])
        high = make_text(power_of_ten(top), size=SIZE_SMALL, color=PALETTE["muted"])
        low.next_to(cells, LEFT, buff=0.12)
        high.next_to(cells, RIGHT, buff=0.12)
        caption = self.text(self.scale_caption, size=SIZE_SMALL, color=PALETTE["muted"])
        caption.next_to(VGroup(low, high), UP, buff=0.1)
        caption.align_to(low, LEFT)
        bar = VGroup(cells, frame, low, high, caption)
        return bar.move_to([0, 0, 0]).to_corner(DOWN + LEFT, buff=0.45).shift(UP * 0.25)

    def _readout(self, arch: str, name: str, ratio: float, step: int):
        """``||dL/dh_1|| / ||dL/dh_L||`` of ``arch`` at ``step``, under its row's lane or blocks, at the right."""
        text = self.text("ratio", size=SIZE_SMALL, color=PALETTE[arch],
                         value=self.number(f"{name}.step.{step}.first_over_last_out_grad_norm", ratio))
        y = self._row_y[arch] + 0.62 / 2 + 0.32
        return text.move_to([self._x_span[1] + 0.55, y, 0], aligned_edge=RIGHT)

    @staticmethod
    def _fill_opacity(level: float) -> float:
        return float(0.06 + 0.94 * level) if level > 0 else 0.0

    @staticmethod
    def _segment_style(level: float) -> tuple[float, float]:
        """(stroke width, opacity) of a lit wire or lane segment at ``level``."""
        return (1.0 + 11.0 * level, 0.15 + 0.85 * level) if level > 0 else (0.0, 0.0)

    def _light(self, row: dict, levels: np.ndarray, reached_x: float) -> None:
        """Light every block (and its stretch of wire or lane) at or right of ``reached_x``."""
        for l, (fill, seg, x) in enumerate(zip(row["fills"], row["segments"], row["xs"])):
            on = x >= reached_x
            fill.set_fill(opacity=self._fill_opacity(levels[l]) if on else 0.0)
            width, opacity = self._segment_style(levels[l]) if on else (0.0, 0.0)
            seg.set_stroke(width=width, opacity=opacity)

    def _lit_targets(self, row: dict, levels: np.ndarray) -> list:
        """Animations taking a fully lit row to ``levels``: the blocks' fills and the wire or lane segments
        (one Restyle per group; frame for frame what ``.animate.set_fill``/``set_stroke`` per block drew)."""
        def fill(block, l):
            block.set_fill(opacity=self._fill_opacity(levels[l]))

        def stroke(segment, l):
            width, opacity = self._segment_style(levels[l])
            segment.set_stroke(width=width, opacity=opacity)

        return [Restyle(row["fills"], fill), Restyle(row["segments"], stroke)]

    def _run_pulse(self, row: dict, levels: np.ndarray, present: np.ndarray | None = None,
                   run_time: float = 3.2) -> None:
        """A glowing pulse from the loss end to the input end of ``row``; brightness and size follow
        ``levels`` [depth]; the blocks it has passed stay lit."""
        xs, y = row["xs"], row["path_y"]
        where = ValueTracker(row["out_x"])
        glow = VGroup(*[Circle(radius=1.0, stroke_width=0, fill_color=PALETTE["grad"]) for _ in range(3)])

        def follow(group: VGroup) -> None:
            x = where.get_value()
            level = value_along(levels, xs, x, present)
            radius = 0.05 + 0.2 * level
            for circle, (grow, alpha) in zip(group, ((2.6, 0.16), (1.7, 0.35), (1.0, 0.95))):
                circle.scale_to_fit_width(2 * radius * grow).move_to([x, y, 0]).set_fill(opacity=alpha * level)

        def light(_) -> None:
            self._light(row, levels, where.get_value())

        follow(glow)
        glow.add_updater(follow)
        # The lighting is the blocks' own updater, so that Manim redraws them on every frame of the pulse
        # (a mobject changed only by another one's updater stays in the still background of the play).
        row["fills"].add_updater(light)
        row["segments"].add_updater(lambda _: None)  # restyled by light(): redrawn each frame too
        self.add(glow)
        self.play(where.animate.set_value(row["in_x"]), run_time=run_time, rate_func=linear)
        glow.clear_updaters()
        row["fills"].clear_updaters()
        row["segments"].clear_updaters()
        self._light(row, levels, row["in_x"])
        self.remove(glow)
