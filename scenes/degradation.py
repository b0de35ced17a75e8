"""Degradation: training-error curves drawn as they train, plain shallow vs deep, then residual.

Example::

    python render.py render Degradation --quality l

He et al. 2015, Fig. 1 and Fig. 6: with the same optimiser and step budget a deeper *plain* network
reaches a higher training error than a shallower one (an optimisation problem, not overfitting, and
not vanishing gradients: the nets use BatchNorm), while residual networks of the same depths do not
degrade. The scene draws the measured curves of every depth of the ``degradation`` experiment and
states whether this run reproduces each claim.
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, UP, Create, Dot, FadeIn, VGroup, VMobject, linear

from scenes.kit.base import LectureScene
from scenes.kit.helpers import compare, finite_max, running_mean, steps_run
from scenes.kit.layout import EDGE_BUFF, line_width
from scenes.kit.seeds import SeedSpread, count_true
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, make_wrapped_text
from scenes.kit.widgets import LinearAxes, make_legend

__all__ = ["Degradation", "running_mean", "runs_by_depth", "smoothing_window", "error_curve", "MARGIN"]

# A deeper net "trains worse" when its final (smoothed) training error exceeds the shallower one's by
# more than this: one percentage point, above the batch-to-batch noise of the smoothed curve.
MARGIN = 0.01


def runs_by_depth(traces: dict, arch: str) -> list[tuple[int, str]]:
    """``[(depth, run_name), ...]`` of the runs of architecture ``arch``, shallowest first."""
    return sorted((t.run_config.depth, name) for name, t in traces.items() if t.run_config.arch == arch)


def smoothing_window(steps: int) -> int:
    """Steps averaged per point: a tenth of the run, at least 1 (the last point then equals
    ``simulation.summary.tail_mean(error_curve)``, the figure the README table reports)."""
    return max(1, int(round(steps * 0.1)))


def error_curve(trace, points: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """(steps, smoothed training error) of one run, at most ``points`` of them, float64.

    ``error_curve`` holds every step's batch error; steps never run (NaN after a divergence, which
    the metadata records) are dropped; any other NaN is a missing value and stays NaN (a gap). The
    smoothing is :func:`scenes.kit.helpers.running_mean` over :func:`smoothing_window` steps.
    """
    curve = np.asarray(trace["error_curve"], dtype=np.float64)
    done = steps_run(trace, len(curve))
    if done == 0:  # diverged at the first step: one missing point
        return np.zeros(1), np.full(1, np.nan)
    smooth = running_mean(curve[:done], smoothing_window(done))
    keep = np.unique(np.linspace(0, done - 1, min(points, done)).round().astype(int))
    return keep.astype(np.float64), smooth[keep]


class Degradation(SeedSpread, LectureScene):
    """Training error vs step of plain nets of several depths, then residual nets (He 2015, Fig. 1, 6)."""

    _source = "He et al. 2015, Fig. 1, Fig. 6"  # the paper cited on screen (and by the explorer, cli/explore.py)
    experiment = "degradation"

    def construct(self) -> None:
        plain_runs, residual_runs = runs_by_depth(self.traces, "plain"), runs_by_depth(self.traces, "residual")
        any_trace = self.traces[plain_runs[0][1]]
        steps = int(any_trace.run_config.steps)
        window = smoothing_window(steps)
        curves = {}
        for _, name in plain_runs + residual_runs:
            curves[name] = error_curve(self.traces[name])
            for step, value in zip(*curves[name]):
                self.number(f"{name}.step.{int(step)}.smoothed_error", value)
        final = {name: curve[1][-1] for name, curve in curves.items()}
        seed_final = {name: self.across_seeds(name, lambda t: error_curve(t)[1][-1]) for name in curves}
        for name, by_seed in seed_final.items():
            for seed, value in by_seed.items():
                self.number(f"{name}.seed.{seed}.final_error_pct", 100 * value)
        seed_worse = {}  # arch -> (seeds where the deepest trains worse, seeds with both values)
        for arch, runs in (("plain", plain_runs), ("residual", residual_runs)):
            deep, shallow = seed_final[runs[-1][1]], seed_final[runs[0][1]]
            verdicts = [compare(deep[s], shallow[s], MARGIN) for s in deep if s in shallow]
            seed_worse[arch] = count_true(v for v in verdicts if v is not None)
        worse = {arch: compare(final[runs[-1][1]], final[runs[0][1]], MARGIN)  # deepest vs shallowest; None: missing
                 for arch, runs in (("plain", plain_runs), ("residual", residual_runs))}
        highest = finite_max(np.concatenate([c[1] for c in curves.values()]), default=0.1)
        y_top = min(1.0, float(np.ceil(highest * 10 + 1e-9) / 10) or 0.1)

        # 1. Title and what is held fixed.
        title = self.title("title")
        norm = self.t("with_bn") if getattr(any_trace.run_config, "norm", None) == "batchnorm" else self.t("without_bn")
        subtitle = self.text("subtitle", size=SIZE_SMALL, color=PALETTE["muted"], norm=norm, window=window)
        subtitle.next_to(title, DOWN, buff=0.15)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(subtitle), run_time=1.5)

        # 2. Plain nets, drawn as they train; 3. residual nets of the same depths.
        for col, (arch, runs, color, narration) in enumerate([
                ("plain", plain_runs, PALETTE["plain"], "n_plain"),
                ("residual", residual_runs, PALETTE["residual"], "n_residual")]):
            chart = LinearAxes((0, steps), (0, y_top), width=5.0, height=2.5,
                               y_format=lambda v: f"{v * 100:g}%")
            chart.move_to([-3.45 + 7.0 * col, 0.35, 0])
            heading = self.text(f"panel_{arch}", size=SIZE_LABEL, color=color)  # tops aligned, whatever the letters
            heading.move_to([chart.axes.get_center()[0], 0, 0]).align_to(chart.axes.get_top() + 0.48 * UP, UP)
            x_label = self.text("axis_step", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.08)
            shades = [color.interpolate(PALETTE["text"], 0.5 * (1 - k / max(len(runs) - 1, 1)))  # shallow: paler
                      for k in range(len(runs))]
            lines = [chart.polyline(*curves[name], color=shade, stroke_width=3 + k, what=f"{name}.error_curve")
                     for k, ((_, name), shade) in enumerate(zip(runs, shades))]
            legend = make_legend([(self.t("curve", depth=depth, error=self.percent(f"{name}.final_error",
                                                                                   curves[name][1][-1])), shade)
                                  for (depth, name), shade in zip(runs, shades)], size=SIZE_SMALL)
            legend.next_to(x_label, DOWN, buff=0.15)
            self.narrate(narration, 4)
            self.play(Create(chart), FadeIn(heading), FadeIn(x_label), run_time=1.2)
            self.draw_with_pens(lines, run_time=5)
            bands = VGroup(*[self.seed_band(chart, name, shade) for (_, name), shade in zip(runs, shades)])
            self.play(FadeIn(legend), FadeIn(bands), run_time=0.8)
            if arch == "plain":
                self.narrate({True: "n_not_overfit", False: "n_no_gap", None: "no_verdict"}[worse["plain"]], 4)
                self.wait(3)

        # 4. The verdict, computed from the runs.
        lines = VGroup()
        for arch, runs in (("plain", plain_runs), ("residual", residual_runs)):
            shallow, deep = final[runs[0][1]], final[runs[-1][1]]
            key = {"plain": ("plain_no_degrade", "plain_degrades"),
                   "residual": ("residual_fine", "residual_degrades")}[arch][worse[arch]] \
                if worse[arch] is not None else "no_verdict"
            k, n = seed_worse[arch]
            self.number(f"{arch}.deeper_worse.seeds", k)
            self.number(f"{arch}.deeper_worse.of", n)
            verdict = self.t(key, deep=self.percent(f"{arch}.deepest_final_error", deep),
                             shallow=self.percent(f"{arch}.shallowest_final_error", shallow))
            lines.add(make_wrapped_text(self.t("verdict_seeds", verdict=verdict, count=self.t("seed_count", k=k, n=n)),
                                        line_width(), size=SIZE_SMALL, color=PALETTE[arch]))
        lines.arrange(DOWN, aligned_edge=LEFT, buff=0.12)
        lines.to_edge(LEFT, buff=EDGE_BUFF).to_edge(DOWN, buff=0.62)
        self.above_citation(lines, self._source)
        self.narrate("n_verdict", 3)
        self.play(FadeIn(lines, shift=UP * 0.2), run_time=1.2)
        self.cite(self._source)
        if len(self.seed_traces) > 1:
            note = self.text("seed_band", size=SIZE_SMALL, color=PALETTE["muted"], n=len(self.seed_traces))
            self.add(note.to_corner(DOWN + LEFT, buff=[EDGE_BUFF, 0.3, 0]))
        self.wait(4)

    def draw_with_pens(self, lines: list[VMobject], run_time: float) -> None:
        """Draw ``lines`` together at an even pace (seconds), a dot of each line's colour at its tip; the dots stay."""
        dots = [Dot(line.get_start(), radius=0.06, color=line.get_color()) for line in lines]
        for dot, line in zip(dots, lines):  # the pen: always at the tip of the partly drawn curve
            dot.add_updater(lambda d, line=line: d.move_to(line.get_end()))
        self.add(*dots)
        self.play(*[Create(line, rate_func=linear) for line in lines], run_time=run_time)
        for dot in dots:
            dot.clear_updaters()

    def seed_band(self, chart, name: str, color) -> VMobject:
        """The range over seeds of run ``name``'s smoothed error curve, as a faint band on ``chart``
        (steps where a seed has no value are left out)."""
        rows = [error_curve(traces[name]) for traces in self.seed_traces.values() if name in traces]
        length = min(len(steps) for steps, _ in rows)
        steps, values = rows[0][0][:length], np.array([v[:length] for _, v in rows])
        ok = np.isfinite(values).all(axis=0)
        steps, low, high = steps[ok], values[:, ok].min(axis=0), values[:, ok].max(axis=0)
        band = VMobject(stroke_width=0, fill_color=color, fill_opacity=0.2 if len(rows) > 1 and len(steps) > 1 else 0.0)
        if len(steps) < 2:
            return band.set_points_as_corners([chart.point(0, 0)] * 2)
        outline = [chart.point(x, y) for x, y in zip(steps, high)] + \
            [chart.point(x, y) for x, y in zip(steps[::-1], low[::-1])]
        return band.set_points_as_corners(outline + outline[:1])
