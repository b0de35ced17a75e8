"""ChainRuleProduct: the per-layer factors of the backward pass multiplied layer by layer.

Example::

    manim -ql scenes/chain_rule.py ChainRuleProduct

The running product ||dL/dh_l|| / ||dL/dh_L|| of a real plain sigmoid network at initialisation
shrinks geometrically (sigma' <= 1/4 per layer); the residual network's stays near 1 because each
block contributes (1 + dF/dx) instead of dF/dx. Source: He et al. 2015 §1; D2L §8.6 (ResNet).
"""

from __future__ import annotations

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Create, Dot, FadeIn, MathTex, Transform, VGroup, VMobject, Write)

from scenes.base import LectureScene
from scenes.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.widgets import LogAxes, safe_log10

__all__ = ["ChainRuleProduct", "running_product"]


def running_product(out_grad_norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From ``out_grad_norm`` [depth] (||dL/dh_l|| at one step) return (factors, product), both [depth].

    ``product[l] = ||dL/dh_l|| / ||dL/dh_{L-1}||`` (1 at the last block) and
    ``factors[l] = product[l] / product[l+1]`` (factors[-1] = 1): the shrink of each backward step.
    """
    g = np.asarray(out_grad_norm, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        product = g / g[-1]
        factors = np.append(product[:-1] / product[1:], 1.0)
    return factors, product


class ChainRuleProduct(LectureScene):
    """Backward pass of a plain and a residual sigmoid net at step 0, layer by layer on a log axis."""

    experiment = "chain_rule"
    strings = {
        "title": {"en": "The chain rule multiplies", "zh": "链式法则是连乘"},
        "axis_x": {"en": "block l (the gradient flows right to left)", "zh": "第 l 块（梯度从右向左传）"},
        "axis_y": {"en": "‖∂L/∂h_l‖ / ‖∂L/∂h_L‖", "zh": "‖∂L/∂h_l‖ / ‖∂L/∂h_L‖"},
        "plain": {"en": "plain sigmoid net", "zh": "普通 sigmoid 网络"},
        "residual": {"en": "residual sigmoid net", "zh": "残差 sigmoid 网络"},
        "factor": {"en": "× {value}", "zh": "× {value}"},
        "weights": {"en": "first / last block ‖∂L/∂W‖ at step 0:  plain {plain}   residual {residual}",
                    "zh": "第一块 / 最后一块 ‖∂L/∂W‖（第 0 步）：普通 {plain}   残差 {residual}"},
        "n_formula": {"en": "Backpropagation multiplies one factor per layer.",
                      "zh": "反向传播每经过一层就乘上一个因子。"},
        "n_plain": {"en": "With sigmoid, each factor is small, and the product vanishes.",
                    "zh": "用 sigmoid 时每个因子都很小，乘积迅速消失。"},
        "n_residual": {"en": "With a shortcut, each factor is 1 + something: the product survives.",
                       "zh": "有了捷径，每个因子是 1 加上一点：乘积得以保留。"},
    }

    def construct(self) -> None:
        plain, residual = self.traces["plain"], self.traces["residual"]
        depth = plain.config["depth"]
        _, plain_product = running_product(plain["out_grad_norm"][0])
        plain_factors, _ = running_product(plain["out_grad_norm"][0])
        res_factors, res_product = running_product(residual["out_grad_norm"][0])
        for l in range(depth):
            self.number(f"plain.block.{l}.product", plain_product[l])
            self.number(f"residual.block.{l}.product", res_product[l])

        # 1. The formula (He et al. use the same product; D2L writes it per layer).
        title = self.title("title")
        formula = MathTex(
            r"\frac{\partial L}{\partial W^1} = \frac{\partial L}{\partial A^3}\cdot g^{3\prime} W^3"
            r"\cdot g^{2\prime} W^2 \cdot g^{1\prime} \cdot \frac{\partial Z^1}{\partial W^1}",
            font_size=34, color=PALETTE["text"]).next_to(title, DOWN, buff=0.2)
        self.narrate("n_formula", 3)
        self.play(FadeIn(title), Write(formula), run_time=2)

        # 2. Log axes sized to the data.
        low = float(np.nanmin(safe_log10(np.concatenate([plain_product, res_product]), floor=1e-300)))
        exp_min = int(np.floor(max(low, -300))) - 1
        axes = LogAxes((1, depth, 1), (exp_min, 1), width=7.0, height=3.3)
        axes.move_to([-1.5, -1.05, 0])
        x_label = self.text("axis_x", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(axes, DOWN, buff=0.12)
        y_label = make_text(self.t("axis_y"), size=SIZE_SMALL, color=PALETTE["muted"])
        y_label.next_to(axes.axes, UP, buff=0.12).align_to(axes, LEFT)
        self.play(Create(axes.axes), FadeIn(axes.ticks), FadeIn(x_label), FadeIn(y_label))

        # 3. Layer by layer, from the output back to the input.
        legend_x = axes.get_right()[0] + 0.5
        rows = {}
        for row, (name, color, factors, product) in enumerate([
                ("plain", PALETTE["plain"], plain_factors, plain_product),
                ("residual", PALETTE["residual"], res_factors, res_product)]):
            label = self.text(name, size=SIZE_LABEL, color=color)
            label.move_to([legend_x, 0.9 - 1.5 * row, 0], aligned_edge=LEFT)
            readout = make_text(self.t("factor", value="1"), size=SIZE_LABEL, color=color)
            readout.next_to(label, DOWN, aligned_edge=LEFT, buff=0.12)
            rows[name] = (label, readout, color, factors, product)
            self.add(label, readout)
        for name, narration in (("plain", "n_plain"), ("residual", "n_residual")):
            label, readout, color, factors, product = rows[name]
            self.narrate(narration, 0.35 * depth + 1)
            points = [axes.point(l + 1, product[l]) for l in range(depth)]
            curve = VMobject(color=color, stroke_width=4)
            curve.set_points_as_corners([points[-1], points[-1]])
            self.add(curve)
            dot = Dot(points[-1], color=color, radius=0.07)
            self.add(dot)
            for l in range(depth - 2, -1, -1):  # the factor between block l+1 and block l
                new_readout = make_text(self.t("factor", value=self.number(f"{name}.block.{l}.factor", factors[l])),
                                        size=SIZE_LABEL, color=color).move_to(readout, aligned_edge=LEFT)
                new_curve = VMobject(color=color, stroke_width=4).set_points_as_corners(points[l:][::-1])
                self.play(Transform(curve, new_curve), dot.animate.move_to(points[l]),
                          Transform(readout, new_readout), run_time=0.35)
            self.wait(0.5)

        # 4. Weight gradients, first block over last block.
        ratios = {name: float(t["grad_norm"][0, 0] / t["grad_norm"][0, -1])
                  for name, t in (("plain", plain), ("residual", residual))}
        summary = self.text("weights", size=SIZE_LABEL,
                            plain=self.number("plain.first_over_last_grad_norm", ratios["plain"]),
                            residual=self.number("residual.first_over_last_grad_norm", ratios["residual"]))
        summary.next_to(x_label, DOWN, buff=0.12).to_edge(LEFT, buff=0.4)
        self.play(FadeIn(summary))
        self.cite("He et al. 2015, §1; D2L §5.4")
        self.wait(2)
