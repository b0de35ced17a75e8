"""IdentityHighway: H(x) = F(x) + x, with the real ||x|| and ||F(x)|| of a trained residual net.

Example::

    manim -ql scenes/highway.py IdentityHighway

Source: He et al. 2015, "Deep Residual Learning for Image Recognition", §3.1 and Fig. 2 (the block),
Fig. 7 (residual responses are small).
"""

from __future__ import annotations

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Arrow, Create, Dot, FadeIn, GrowFromEdge, Line, MathTex,
                   MoveAlongPath, VGroup, VMobject, Write, Indicate)

from scenes.base import LectureScene
from scenes.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.widgets import make_add_node, make_bar_pairs, make_box

__all__ = ["IdentityHighway"]


class IdentityHighway(LectureScene):
    """x splits into the residual branch F(x) and the identity path; they meet at the add node."""

    experiment = "residual_response"
    strings = {
        "title": {"en": "The identity highway", "zh": "恒等高速路"},
        "identity": {"en": "identity shortcut: x", "zh": "恒等捷径：x"},
        "branch": {"en": "residual branch F(x)", "zh": "残差分支 F(x)"},
        "act": {"en": "act", "zh": "激活"},
        "measured": {"en": "trained residual net, {depth} blocks, digits: per-block mean norms",
                     "zh": "训练后的残差网络（{depth} 块，digits 数据）：每块的平均范数"},
        "x_norm": {"en": "‖x‖ (input of block)", "zh": "‖x‖（块的输入）"},
        "f_norm": {"en": "‖F(x)‖ (branch)", "zh": "‖F(x)‖（分支）"},
        "ratio": {"en": "mean ‖F(x)‖ / ‖x‖ = {ratio}: keep x as is, F fine-tunes it",
                  "zh": "平均 ‖F(x)‖ / ‖x‖ = {ratio}：保留 x，F 只做微调"},
        "n_intro": {"en": "A residual block adds its input back to what its layers compute.",
                    "zh": "残差块把输入直接加回到各层的计算结果上。"},
        "n_flow": {"en": "The signal travels both roads and meets again at the addition.",
                   "zh": "信号同时走两条路，在加法处汇合。"},
        "n_measure": {"en": "In a trained network the branch is small next to the highway.",
                      "zh": "在训练好的网络里，分支远小于主干。"},
    }

    def construct(self) -> None:
        trace = self.traces["residual"]
        depth = trace.config["depth"]

        # 1. Title and the block diagram.
        title = self.title("title")
        formula = MathTex(r"H(x) = F(x) + x", font_size=40, color=PALETTE["text"]).next_to(title, DOWN, buff=0.2)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), Write(formula), run_time=1.5)
        diagram, identity_path, branch_path, add_node = self.get_diagram()
        self.play(Create(diagram), run_time=2)

        # 2. The signal travels both paths and meets at the add node.
        self.narrate("n_flow", 3)
        dots = [Dot(color=PALETTE["identity"]), Dot(color=PALETTE["branch"])]
        self.play(MoveAlongPath(dots[0], identity_path), MoveAlongPath(dots[1], branch_path), run_time=2)
        self.play(Indicate(add_node, color=PALETTE["identity"]), *[d.animate.set_opacity(0) for d in dots])
        self.remove(*dots)

        # 3. Real norms of a trained net: last record of every block.
        x_norm, f_norm = trace["input_norm"][-1], trace["branch_norm"][-1]
        ratio = float(np.mean(f_norm / x_norm))
        for i in range(depth):
            self.number(f"block.{i}.input_norm", x_norm[i])
            self.number(f"block.{i}.branch_norm", f_norm[i])
        self.narrate("n_measure", 4)
        bars = make_bar_pairs(x_norm, f_norm, (PALETTE["identity"], PALETTE["branch"]), width=8, height=1.7)
        bars.move_to([-1.9, -2.15, 0])
        caption = self.text("measured", size=SIZE_LABEL, depth=depth).next_to(bars, UP, buff=0.2)
        legend = VGroup(
            make_text(self.t("x_norm"), size=SIZE_SMALL, color=PALETTE["identity"]),
            make_text(self.t("f_norm"), size=SIZE_SMALL, color=PALETTE["branch"]),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.1).next_to(bars, RIGHT, buff=0.25)
        self.play(FadeIn(caption), FadeIn(legend),
                  *[GrowFromEdge(bar, DOWN) for bar in [*bars[0], *bars[1]]], Create(bars[2]), run_time=2)
        conclusion = self.text("ratio", size=SIZE_LABEL, ratio=self.number("mean_branch_to_input_ratio", ratio))
        conclusion.next_to(bars, DOWN, buff=0.15).to_edge(LEFT, buff=0.4)
        self.play(Write(conclusion))
        self.cite("He et al. 2015, Fig. 2, Fig. 7")
        self.wait(2)

    def get_diagram(self) -> tuple[VGroup, VMobject, VMobject, VGroup]:
        """Block diagram: x -> {identity, Linear-act-Linear} -> ⊕ -> H(x). Returns (group, paths, node)."""
        y, top = 0.35, 1.55
        x_label = MathTex("x", font_size=40).move_to([-6.2, y, 0])
        add_node = make_add_node().move_to([3.6, y, 0])
        out_label = MathTex("H(x)", font_size=40).move_to([5.6, y, 0])
        boxes = VGroup(make_box("Linear"), make_box(self.t("act"), width=1.0), make_box("Linear")).arrange(RIGHT, buff=0.45)
        boxes.move_to([-0.6, top, 0])
        start, split = np.array([-5.9, y, 0]), np.array([-4.6, y, 0])
        identity_path = Line(start, add_node.get_left(), color=PALETTE["identity"], stroke_width=8)
        branch_path = VMobject(color=PALETTE["branch"], stroke_width=3).set_points_as_corners([
            start, split, [-4.6, top, 0], boxes.get_left(), boxes.get_right(), [3.6, top, 0], add_node.get_top()])
        arrows = VGroup(*[Arrow(a.get_right(), b.get_left(), buff=0.05, stroke_width=3, max_tip_length_to_length_ratio=0.3,
                                color=PALETTE["branch"]) for a, b in zip(boxes[:-1], boxes[1:])])
        out_arrow = Arrow(add_node.get_right(), out_label.get_left(), buff=0.1, color=PALETTE["text"])
        id_label = self.text("identity", size=SIZE_LABEL, color=PALETTE["identity"]).next_to(identity_path, DOWN, buff=0.15)
        branch_label = self.text("branch", size=SIZE_LABEL, color=PALETTE["branch"]).next_to(boxes, UP, buff=0.15)
        group = VGroup(x_label, identity_path, branch_path, boxes, arrows, add_node, out_arrow, out_label,
                       id_label, branch_label)
        return group, identity_path, branch_path, add_node
