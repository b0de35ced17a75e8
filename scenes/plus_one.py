"""GradientPlusOne: dL/dx = dL/dy (1 + dF/dx), and the per-layer gradient norms it produces.

Example::

    python render.py render GradientPlusOne --quality l

Differentiating y = x + F(x) gives dL/dx = dL/dy (1 + dF/dx): the identity adds a 1 to every
backward factor, so the gradient reaching early blocks cannot vanish through the product (He et al.
2016, "Identity Mappings in Deep Residual Networks", Eq. 5). Bars: the measured ||dL/dW_l|| of every
block of the plain and the residual sigmoid network of the ``chain_rule`` experiment at step 0.
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, FadeIn, GrowFromEdge, MathTex, VGroup

from simulation.experiments import PLAIN, RESIDUAL

from scenes.kit.base import LectureScene
from scenes.chain_rule import running_product
from scenes.kit.layout import inside_margin
from scenes.sigmoid import geometric_mean_factor
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL
from scenes.kit.widgets import LogAxes, log_floor_exponent, make_legend, make_log_bars

__all__ = ["GradientPlusOne"]


class GradientPlusOne(LectureScene):
    """The +1 of the identity in the backward pass; measured per-block gradient norms, plain vs residual."""

    experiment = "chain_rule"

    def construct(self) -> None:
        plain, residual = self.traces[PLAIN], self.traces[RESIDUAL]
        depth = len(plain["grad_norm"][0])
        grads = {"plain": plain["grad_norm"][0], "residual": residual["grad_norm"][0]}  # [depth] each
        factors, factor_sub = self.backward_factors({"plain": plain, "residual": residual})
        for name, values in grads.items():
            for l in range(depth):
                self.number(f"{name}.block.{l}.grad_norm", values[l])

        # 1. The two backward rules, side by side.
        title = self.title("title")
        rules = VGroup()
        for name, parts in (("plain", [r"\frac{\partial L}{\partial x} = \frac{\partial L}{\partial y}"
                                       r"\cdot\frac{\partial F}{\partial x}"]),
                            ("residual", [r"\frac{\partial L}{\partial x} = \frac{\partial L}{\partial y}\cdot\Bigl(",
                                          "1", r"+ \frac{\partial F}{\partial x}\Bigr)"])):
            label = self.text(f"{name}_rule", size=SIZE_LABEL, color=PALETTE[name])
            formula = MathTex(*parts, font_size=34, color=PALETTE["text"])
            rules.add(VGroup(label, formula).arrange(DOWN, buff=0.15))
        rules.arrange(RIGHT, buff=1.4).next_to(title, DOWN, buff=0.25)
        one = rules[1][1][1]  # the "1" the identity contributes
        self.narrate("n_rule", 4)
        self.play(FadeIn(title), FadeIn(rules[0]), run_time=1.5)
        self.play(FadeIn(rules[1]), run_time=1.5)
        self.play(one.animate.set_color(PALETTE["identity"]).scale(1.4), run_time=0.8)
        self.play(one.animate.scale(1 / 1.4), run_time=0.4)
        self.wait(1)

        # 2. Log axes sized to the data; one pair of bars per block.
        all_values = np.concatenate(list(grads.values()))
        centre_y, height = self._axes_box
        axes = LogAxes((0.5, depth + 0.5, 1), (log_floor_exponent(all_values), 0), width=7.4, height=height)
        axes.move_to([-2.2, centre_y, 0])
        under = self.block_axis(axes, depth)  # the blocks' names under the axis (a user model), or None
        x_label = self.text("axis_x", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(under or axes, DOWN, buff=0.12)
        y_label = self.text("axis_y", size=SIZE_SMALL, color=PALETTE["muted"])
        y_label.next_to(axes.axes, UP, buff=0.1).align_to(axes, LEFT)
        bars = {name: make_log_bars(axes, grads[name], PALETTE[name], x_offset=offset, bar_width=0.32)
                for name, offset in (("plain", -0.18), ("residual", 0.18))}
        legend = make_legend([(self.t("plain"), PALETTE["plain"]), (self.t("residual"), PALETTE["residual"])])
        legend.next_to(axes, RIGHT, buff=0.35).align_to(axes.axes, UP)
        self.narrate("n_bars", 4)
        self.play(Create(axes.axes), FadeIn(axes.ticks), FadeIn(x_label), FadeIn(y_label),
                  *([FadeIn(under)] if under else []), run_time=1)
        self.play(FadeIn(legend[0]), *[GrowFromEdge(bar, DOWN) for bar in bars["plain"]], run_time=2)
        self.wait(1)
        self.narrate("n_residual", 4)
        self.play(FadeIn(legend[1]), *[GrowFromEdge(bar, DOWN) for bar in bars["residual"]], run_time=2)

        # 3. The measured backward factor per block: one plus a little for the residual net.
        readout = VGroup(
            self.text("factor_head", size=SIZE_SMALL),
            self.text(factor_sub, size=SIZE_SMALL, color=PALETTE["muted"]),
            self.text("factor_plain", size=SIZE_LABEL, color=PALETTE["plain"],
                      value=self.number("plain.mean_factor", factors["plain"])),
            self.text("factor_residual", size=SIZE_LABEL, color=PALETTE["residual"],
                      value=self.number("residual.mean_factor", factors["residual"], digits=4)),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.12)
        inside_margin(readout.next_to(legend, DOWN, buff=0.45, aligned_edge=LEFT))
        self.play(FadeIn(readout), run_time=1)
        self.cite("He et al. 2016, Eq. (5)")
        self.wait(3)

    _axes_box = (-1.15, 2.9)  # centre y and height of the log axes (scene units)

    def backward_factors(self, traces: dict) -> tuple[dict[str, float], str]:
        """({"plain": f, "residual": f}, the key of the line that says what f is) at step 0: f is the geometric
        mean over the L - 1 backward steps of ||dL/dh_l|| / ||dL/dh_(l+1)|| (:func:`geometric_mean_factor`). The
        built-in nets feed each block's output straight into the next block, so that is the mean of
        ||dL/dx|| / ||dL/dy|| of blocks 2 ... L, as the line says."""
        return ({name: geometric_mean_factor(running_product(t["out_grad_norm"][0])[1]) for name, t in traces.items()},
                "factor_sub")

    def block_axis(self, axes, depth: int):
        """Mobjects naming the blocks under the axis (placed), or None: the built-in nets' blocks are numbered."""
        return None
