"""SigmoidDerivative: sigma' = sigma (1 - sigma) <= 1/4, and what that bound does to a stack of layers.

Example::

    python render.py render SigmoidDerivative --quality l

Left: sigma and sigma' computed on a grid; the maximum of sigma' (1/4 at z = 0) is read off the
computed curve. Right: the bound (max sigma')^k after k layers beside the measured running product
||dL/dh_l|| / ||dL/dh_L|| of the real plain sigmoid network of the ``chain_rule`` experiment at step 0.
The bound covers sigma' only: every layer's weights multiply in as well, so the measured product may
fall faster or slower. Sources: D2L §5.4 (numerical stability, vanishing gradients); He et al. 2015, §1.
"""

from __future__ import annotations

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Axes, Create, Dot, FadeIn, MathTex, VGroup, VMobject, Write)

from simulation.experiments import PLAIN

from scenes.kit.base import LectureScene
from scenes.chain_rule import running_product
from scenes.kit.style import PALETTE, SIZE_SMALL
from scenes.kit.widgets import LogAxes, log_floor_exponent, make_dashed_polyline, make_legend

__all__ = ["SigmoidDerivative", "sigmoid", "sigmoid_prime", "derivative_bound", "geometric_mean_factor"]


def sigmoid(z: np.ndarray | float) -> np.ndarray:
    """The logistic function 1 / (1 + e^-z), elementwise, float64."""
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def sigmoid_prime(z: np.ndarray | float) -> np.ndarray:
    """d sigma / dz = sigma(z) (1 - sigma(z)), elementwise, float64; its maximum is 1/4 at z = 0."""
    s = sigmoid(z)
    return s * (1.0 - s)


def derivative_bound(max_factor: float, layers: int) -> np.ndarray:
    """``max_factor ** k`` for k = 0 .. layers - 1, float64 [layers]: the most that ``k`` factors,
    each at most ``max_factor``, can leave of a gradient."""
    return float(max_factor) ** np.arange(layers, dtype=np.float64)


def geometric_mean_factor(product: np.ndarray) -> float:
    """Mean shrink per backward step of a running product [depth] that ends at 1 (last block):
    ``product[0] ** (1 / (depth - 1))``. NaN when product[0] is not a positive finite number."""
    first = float(np.asarray(product, dtype=np.float64)[0])
    steps = len(product) - 1
    if steps < 1 or not (np.isfinite(first) and first > 0):
        return float("nan")
    return first ** (1.0 / steps)


class SigmoidDerivative(LectureScene):
    """sigma' <= 1/4 plotted; the 1/4-per-layer bound beside the measured shrink of a plain sigmoid net."""

    _source = "D2L §5.4; He et al. 2015, §1"  # the paper cited on screen (and by the explorer, cli/explore.py)
    experiment = "chain_rule"

    def construct(self) -> None:
        plain = self.traces[PLAIN]
        depth = plain.run_config.depth
        _, product = running_product(plain["out_grad_norm"][0])  # [depth], 1 at the last block
        measured = product[::-1]  # measured[k]: after k blocks backwards from the last one
        z = np.linspace(-6, 6, 241)
        slope = sigmoid_prime(z)
        peak = int(np.argmax(slope))
        max_slope = float(slope[peak])
        bound = derivative_bound(max_slope, depth)
        mean_factor = geometric_mean_factor(product)

        # 1. Title and formula.
        title = self.title("title")
        formula = MathTex(r"\sigma'(z) = \sigma(z)\,\bigl(1 - \sigma(z)\bigr) \le \tfrac{1}{4}", font_size=40,
                          color=PALETTE["text"]).next_to(title, DOWN, buff=0.2)
        self.narrate("n_formula", 3)
        self.play(FadeIn(title), Write(formula), run_time=2)

        # 2. sigma and sigma' on a grid; the maximum read off the computed curve.
        axes = Axes(x_range=[-6, 6, 2], y_range=[0, 1, 0.25], x_length=5.2, y_length=2.9, tips=False,
                    axis_config={"color": PALETTE["muted"], "stroke_width": 2}).move_to([-3.5, -0.55, 0])
        sig_curve = axes.plot_line_graph(z, sigmoid(z), add_vertex_dots=False, line_color=PALETTE["identity"],
                                         stroke_width=4)
        der_curve = axes.plot_line_graph(z, slope, add_vertex_dots=False, line_color=PALETTE["plain"], stroke_width=4)
        sig_label = MathTex(r"\sigma(z)", font_size=30, color=PALETTE["identity"])
        sig_label.next_to(axes.c2p(3.2, float(sigmoid(3.2))), UP, buff=0.15)
        der_label = MathTex(r"\sigma'(z)", font_size=30, color=PALETTE["plain"])
        der_label.next_to(axes.c2p(3.2, float(sigmoid_prime(3.2))), UP, buff=0.2)
        z_label = MathTex("z", font_size=30, color=PALETTE["muted"]).next_to(axes.x_axis, RIGHT, buff=0.1)
        peak_line = make_dashed_polyline([axes.c2p(-6, max_slope), axes.c2p(6, max_slope)], PALETTE["warn"], 2)
        peak_dot = Dot(axes.c2p(z[peak], max_slope), color=PALETTE["warn"], radius=0.07)
        peak_text = self.text("max", size=SIZE_SMALL, color=PALETTE["warn"],
                              value=self.number("sigma_prime.max", max_slope),
                              at=self.number("sigma_prime.argmax", z[peak]))
        peak_text.next_to(axes, DOWN, buff=0.2)
        self.narrate("n_plot", 4)
        self.play(Create(axes), FadeIn(z_label), run_time=1)
        self.play(Create(sig_curve), FadeIn(sig_label), Create(der_curve), FadeIn(der_label), run_time=2)
        self.play(Create(peak_line), FadeIn(peak_dot, scale=2), FadeIn(peak_text), run_time=1)
        self.wait(0.5)

        # 3. The bound as layers stack, on a log axis sized to the data.
        values = np.concatenate([bound, measured])
        log_axes = LogAxes((0, depth - 1, 1), (log_floor_exponent(values), 0), width=4.9, height=2.9)
        log_axes.move_to([3.55, -0.55, 0])
        k_label = self.text("axis_k", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(log_axes, DOWN, buff=0.15)
        y_label = self.text("axis_y", size=SIZE_SMALL, color=PALETTE["muted"])
        y_label.next_to(log_axes.axes, UP, buff=0.12).align_to(log_axes, LEFT)
        bound_points = [log_axes.point(k, b) for k, b in enumerate(bound)]  # computed: never missing
        bound_line = make_dashed_polyline(bound_points, PALETTE["warn"], 3)
        legend = make_legend([(self.t("bound", value=self.number("sigma_prime.max", max_slope)), PALETTE["warn"]),
                              (self.t("measured", depth=depth), PALETTE["plain"])])
        legend.next_to(formula, DOWN, buff=0.25).align_to(log_axes, LEFT)
        self.narrate("n_stack", 4)
        self.play(Create(log_axes.axes), FadeIn(log_axes.ticks), FadeIn(k_label), FadeIn(y_label), run_time=1)
        self.play(Create(bound_line), FadeIn(legend[0]), run_time=1.5)
        for k in range(depth):
            self.number(f"bound.after.{k}", bound[k])
            self.number(f"plain.measured.after.{k}", measured[k])

        # 4. The measured running product of the real plain sigmoid net, block by block.
        self.narrate(self.verdict_key(max_slope, mean_factor, "n_faster", "n_slower"), 4)
        curve = log_axes.polyline(np.arange(depth), measured, PALETTE["plain"], what="plain.out_grad_norm")
        dots = VGroup(*[Dot(p, radius=0.05, color=PALETTE["plain"])
                        for p in (log_axes.point(k, m) for k, m in enumerate(measured)) if p is not None])
        self.play(Create(curve), FadeIn(dots, lag_ratio=0.2), FadeIn(legend[1]), run_time=2.5)
        mean_text = self.text("mean", size=SIZE_SMALL, color=PALETTE["plain"],
                              value=self.number("plain.mean_factor", mean_factor))
        after_text = self.text("after", size=SIZE_SMALL, k=depth - 1,
                               bound=self.number(f"bound.after.{depth - 1}", bound[-1]),
                               measured=self.number(f"plain.measured.after.{depth - 1}", measured[-1]))
        readout = VGroup(mean_text, after_text).arrange(DOWN, aligned_edge=LEFT, buff=0.1)
        readout.next_to(peak_text, DOWN, buff=0.15).to_edge(LEFT, buff=0.5)
        self.play(FadeIn(readout), run_time=1)
        self.cite(self._source)
        self.wait(3)
