"""IdentityFit: why is "keep as is" easy? A plain and a residual block trained to output their input.

Example::

    python render.py render IdentityFit --quality l --set lr=0.01

He et al. 2015, §3.1: if the identity were the best a block could do, pushing F(x) to zero would be
easier than fitting H(x) = x with a stack of nonlinear layers. The ``identity_fit`` experiment measures
that claim: one plain and one residual block (same widths, same initial weights, same optimiser) learn the
identity on the digits features. The scene draws the relative error ||h - x||^2 / ||x||^2 of both over the
steps and marks the step at which each first falls below the tolerance (or says that it never did).
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, Dot, FadeIn, MathTex, VGroup, VMobject, Write, linear

from scenes.kit.base import LectureScene
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import LogAxes, make_dashed_polyline, make_legend

__all__ = ["IdentityFit", "error_points"]


def error_points(curve: np.ndarray, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(steps, relative error) of ``curve`` [steps] at <= ``points`` evenly spaced steps (first and last
    kept, infinite dropped; a missing NaN value is kept, so it is drawn as a gap): float64 each."""
    curve = np.asarray(curve, np.float64)
    keep = np.unique(np.linspace(0, len(curve) - 1, min(points, len(curve))).round().astype(int))
    keep = keep[~np.isinf(curve[keep])]
    return keep.astype(np.float64), curve[keep]


class IdentityFit(LectureScene):
    """Relative error of a plain and a residual block learning H(x) = x, and the step each reaches the tolerance."""

    experiment = "identity_fit"

    def number_value(self, key: str, value: float) -> float:
        """Record ``value`` under ``key`` in the numbers JSON and return it (shown with its own format)."""
        self.number(key, value)
        return float(value)

    def construct(self) -> None:
        plain, residual = self.traces["plain"], self.traces["residual"]
        config = residual.run_config
        steps, tol = int(config.steps), float(config.tolerance)
        curves = {name: error_points(t["loss_curve"]) for name, t in (("plain", plain), ("residual", residual))}
        reached = {name: int(t["tolerance_step"]) for name, t in (("plain", plain), ("residual", residual))}
        for name, (xs, ys) in curves.items():
            for x, y in zip(xs, ys):
                self.number(f"{name}.step.{int(x)}.relative_error", y)
        colors = {"plain": PALETTE["plain"], "residual": PALETTE["residual"]}

        # 1. Title, the task and what is held fixed.
        title = self.title("title")
        setup = self.text("setup", size=SIZE_SMALL, color=PALETTE["muted"], width=plain.meta.block_widths[0][0],
                          opt=config.optimizer.capitalize() if config.optimizer == "adam" else "SGD",
                          lr=f"{self.number_value('lr', config.lr):g}").next_to(title, DOWN, buff=0.15)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(setup), run_time=1.2)
        tex = VGroup(MathTex(r"H(x) = F(x) \;\to\; x", font_size=32, color=colors["plain"]),
                     MathTex(r"H(x) = x + F(x),\; F(x) \;\to\; 0", font_size=32, color=colors["residual"]))
        tex.arrange(RIGHT, buff=1.2).next_to(setup, DOWN, buff=0.3)
        self.narrate("n_setup", 4.5)
        self.play(Write(tex), run_time=1.5)
        self.wait(1)

        # 2. Both error curves on a log scale, with the tolerance.
        values = np.concatenate([ys for _, ys in curves.values()])
        values = values[values > 0]  # a missing (NaN) value is no comparison's winner: left out of the range
        low = min(float(values.min()), tol) if values.size else tol
        exp_range = (int(np.floor(np.log10(low))), max(int(np.ceil(np.log10(values.max()))), 0) if values.size else 0)
        chart = LogAxes((0, steps - 1, max(steps - 1, 1)), exp_range, width=7.6, height=2.6).move_to([-1.6, -0.45, 0])
        for tick in (0, steps - 1):  # LogAxes labels only its y axis
            chart.ticks.add(make_text(f"{tick:g}", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(
                chart.point(tick, 10.0 ** exp_range[0]), DOWN, buff=0.1))
        axis = self.text("axis", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.1)
        level = make_dashed_polyline([chart.point(0, tol), chart.point(steps - 1, tol)], PALETTE["muted"], 2)
        level_label = self.text("tolerance", size=SIZE_SMALL, color=PALETTE["muted"],
                                tol=self.number("tolerance", tol, 3)).next_to(level, RIGHT, buff=0.1)
        lines = {}
        for name, (xs, ys) in curves.items():
            if np.isnan(ys).any():  # a labelled gap where the error is missing, never a bridge or a 0
                lines[name] = chart.polyline(xs, ys, color=colors[name], stroke_width=4, what=f"{name}.loss_curve")
                continue
            line = VMobject(color=colors[name], stroke_width=4)
            pts = [chart.point(x, y) for x, y in zip(xs, ys)]
            lines[name] = line.set_points_as_corners(pts if len(pts) > 1 else pts * 2)
        legend = make_legend([(self.t("plain"), colors["plain"]), (self.t("residual"), colors["residual"])],
                             size=SIZE_SMALL)
        legend.arrange(RIGHT, buff=0.6).next_to(chart.axes, UP, buff=0.2).align_to(chart.axes, LEFT)
        self.narrate("n_curves", 4)
        self.play(Create(chart), FadeIn(axis), Create(level), FadeIn(level_label), FadeIn(legend), run_time=1.2)
        self.play(*[Create(line, rate_func=linear) for line in lines.values()], run_time=4)

        # 3. The step at which each fell below the tolerance.
        marks = VGroup()
        for k, name in enumerate(("residual", "plain")):
            if reached[name] < 0:
                continue
            where = chart.point(reached[name], tol)
            dot = Dot(where, radius=0.08, color=colors[name])
            label = self.text("reached", size=SIZE_SMALL, color=colors[name],
                              step=self.number(f"{name}.tolerance_step", reached[name], 6))
            label.next_to(dot, UP + RIGHT * 0.5, buff=0.1)
            marks.add(dot, label)
        self.play(FadeIn(marks), run_time=0.8)

        # 4. The verdict, computed from the two runs.
        start = {name: float(t["loss_curve"][0]) for name, t in (("plain", plain), ("residual", residual))}
        fmt = {"tol": self.number("tolerance", tol, 3), "steps": self.number("steps", steps, 6)}
        if reached["residual"] >= 0 and reached["plain"] >= 0:
            key = "both"
            fmt["times"] = self.number("plain_over_residual_steps", reached["plain"] / max(reached["residual"], 1), 2)
        else:
            key = {(True, False): "plain_never", (False, True): "residual_never"}.get(
                (reached["residual"] >= 0, reached["plain"] >= 0), "neither")
        if reached["residual"] >= 0:
            fmt["res"] = self.number("residual.tolerance_step", reached["residual"], 6)
        if reached["plain"] >= 0:
            fmt["plain"] = self.number("plain.tolerance_step", reached["plain"], 6)
        verdict = VGroup(
            self.wrapped("start", size=SIZE_SMALL, res=self.number("residual.step0_error", start["residual"]),
                      plain=self.number("plain.step0_error", start["plain"])),
            self.wrapped(key, size=SIZE_LABEL, color=PALETTE["identity"], **fmt),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.12)
        verdict.to_edge(LEFT, buff=EDGE_BUFF).to_edge(DOWN, buff=0.55)
        self.narrate("n_verdict", 3)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite("He et al. 2015, §3.1")
        self.wait(5)
