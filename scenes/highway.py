"""IdentityHighway: H(x) = F(x) + x, with the real ||x|| and ||F(x)|| of a trained residual net.

Example::

    manim -ql scenes/highway.py IdentityHighway

Steps: the block; the projection shortcut y = F(x) + W_s x where the width changes (its parameter count
computed by :func:`projection_params`); the measured per-block norms; and "F(x) = 0 skips the layer",
with the trained block whose ||F(x)|| / ||x|| is smallest. Source: He et al. 2015, "Deep Residual
Learning for Image Recognition", §3.1 (skip), Eq. 2 and §3.3 (projection), Fig. 2 (the block), Fig. 7
(residual responses are small).
"""

from __future__ import annotations

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Arrow, Create, Dot, FadeIn, FadeOut, GrowFromEdge, Indicate, Line,
                   MathTex, Mobject, MoveAlongPath, Transform, VGroup, VMobject, Write)

from simulation.experiments import RESIDUAL

from scenes.kit.base import LectureScene
from scenes.kit.layout import EDGE_BUFF, text_mobjects
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.theme import stroke_opacity
from scenes.kit.widgets import make_add_node, make_bar_pairs, make_box

__all__ = ["IdentityHighway", "projection_params", "switched_off"]

SWITCHED_OFF = 0.2  # the opacity of a switched-off branch's lines (raised where the theme asks thin lines for contrast)


def switched_off(parts: Mobject) -> Mobject:
    """A copy of ``parts`` drawn as switched off: its lines and fills at :data:`SWITCHED_OFF` of their opacity (thin
    lines no fainter than the theme allows: :func:`scenes.kit.theme.stroke_opacity`), its words in the muted text
    colour at full opacity, so that they stay legible from the back of a hall (a faded word is lost there)."""
    target = parts.copy()
    texts = {id(m) for t in text_mobjects([target], visible_only=False) for m in t.get_family()}
    for mob in target.get_family():
        if id(mob) in texts:
            continue
        mob.set_fill(opacity=SWITCHED_OFF * mob.get_fill_opacity(), family=False)
        width = mob.get_stroke_width()
        mob.set_stroke(opacity=stroke_opacity(mob.get_stroke_color(), SWITCHED_OFF * mob.get_stroke_opacity(), width),
                       family=False)
    for text in text_mobjects([target], visible_only=False):
        text.set_color(PALETTE["muted"])
    return target


def projection_params(d_in: int, d_out: int, bias: bool = False) -> int:
    """Parameters of a projection shortcut W_s: R^d_in -> R^d_out (He et al. 2015, Eq. 2): d_out * d_in,
    plus d_out with a bias. The identity shortcut has none. Raises ValueError for a width below 1."""
    if d_in < 1 or d_out < 1:
        raise ValueError(f"widths must be >= 1; got d_in={d_in}, d_out={d_out}")
    return d_out * d_in + (d_out if bias else 0)


class IdentityHighway(LectureScene):
    """x splits into the residual branch F(x) and the identity path; they meet at the add node."""

    experiment = "residual_response"
    BRANCH_PARTS = (3, 4, 9)  # boxes, arrows and label of the branch in get_diagram's group
    projection_factor = 2  # output width / input width of the projection block: ResNet doubles the width (He 2015 §3.3)
    param_limits = {"projection_factor": (1, 8)}  # a projection shortcut that widens, by up to 8x (cli.params)

    def construct(self) -> None:
        trace = self.traces[RESIDUAL]
        depth = trace.run_config.depth

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

        # 3. When the widths differ, x cannot be added as is: the projection shortcut W_s; then back.
        identity_formula = formula.copy()
        projection = self.get_projection_step(trace.run_config.width, anchor=formula)
        self.play(FadeOut(diagram), Transform(formula, projection["formula"]), run_time=1)
        cite = self.cite("He et al. 2015, Eq. (2), §3.3")
        self.narrate("n_projection", 4.5)
        self.play(Create(projection["diagram"]), run_time=2)
        self.narrate("n_projection_cost", 4)
        self.play(FadeIn(projection["lines"]), run_time=1.2)
        self.wait(2.5)
        self.play(FadeOut(VGroup(projection["diagram"], projection["lines"])), FadeIn(diagram),
                  Transform(formula, identity_formula), run_time=1)

        # 4. Real norms of a trained net: last record of every block.
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
        self.remove(cite)
        cite = self.cite("He et al. 2015, Fig. 2, Fig. 7")
        self.play(FadeIn(caption), FadeIn(legend),
                  *[GrowFromEdge(bar, DOWN) for bar in [*bars[0], *bars[1]]], Create(bars[2]), run_time=2)
        conclusion = self.text("ratio", size=SIZE_LABEL, ratio=self.number("mean_branch_to_input_ratio", ratio))
        conclusion.next_to(bars, DOWN, buff=0.15).to_edge(LEFT, buff=EDGE_BUFF)
        self.play(Write(conclusion))
        self.wait(2)

        # 5. F(x) = 0 means "skip this layer": the branch fades, only the highway carries x.
        skip = self.get_skip_step(x_norm, f_norm, anchor=formula)
        self.play(FadeOut(VGroup(bars, caption, legend, conclusion)), run_time=0.8)
        self.remove(cite)
        self.cite("He et al. 2015, §3.1")
        self.narrate("n_skip", 4.5)
        branch_parts = VGroup(branch_path, *[diagram[i] for i in self.BRANCH_PARTS])
        self.play(Transform(branch_parts, switched_off(branch_parts)), Transform(formula, skip["formula"]),
                  run_time=1.5)
        dot = Dot(color=PALETTE["identity"])
        self.play(MoveAlongPath(dot, identity_path), FadeIn(skip["lines"][0]), run_time=1.5)
        self.remove(dot)
        self.narrate("n_skip_measured", 4.5)
        self.play(FadeIn(skip["lines"][1:]), run_time=1)
        self.play(Indicate(skip["lines"][2], color=PALETTE["identity"], scale_factor=1.05), run_time=1)
        self.wait(2.5)

    def get_diagram(self) -> tuple[VGroup, VMobject, VMobject, VGroup]:
        """Block diagram: x -> {identity, Linear-act-Linear} -> ⊕ -> H(x). Returns (group, paths, node)."""
        y, top = 0.35, 1.55
        x_label = MathTex("x", font_size=40, color=PALETTE["text"]).move_to([-6.2, y, 0])
        add_node = make_add_node().move_to([3.6, y, 0])
        out_label = MathTex("H(x)", font_size=40, color=PALETTE["text"]).move_to([5.6, y, 0])
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
        group = VGroup(x_label, branch_path, identity_path,  # the highway over the branch where they share a stretch
                       boxes, arrows, add_node, out_arrow, out_label,
                       id_label, branch_label)
        return group, identity_path, branch_path, add_node

    def get_skip_step(self, x_norm: np.ndarray, f_norm: np.ndarray, anchor: Mobject) -> dict:
        """F(x) = 0 formula and three lines; the last names the trained block with the smallest ||F|| / ||x||."""
        ratios = f_norm / x_norm
        block = int(np.argmin(ratios))
        formula = MathTex(r"F(x) = 0 \;\Rightarrow\; H(x) = x", font_size=40, color=PALETTE["identity"])
        formula.move_to(anchor)
        lines = VGroup(
            self.text("skip", size=SIZE_LABEL, color=PALETTE["identity"]),
            self.text("plain_identity", size=SIZE_LABEL, color=PALETTE["plain"]),
            self.text("closest", size=SIZE_LABEL, block=self.number("skip.closest_block", block + 1),
                      ratio=self.number(f"block.{block}.branch_to_input_ratio", ratios[block])),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.2).move_to([0, -2.0, 0]).to_edge(LEFT, buff=0.5)
        return {"formula": formula, "lines": lines}

    def get_projection_step(self, width: int, anchor: Mobject) -> dict:
        """Block whose output width differs: branch R^d_in -> R^d_out, shortcut W_s; formula and cost."""
        d_in, d_out = int(width), int(width * self.projection_factor)
        params = projection_params(d_in, d_out)
        n_in, n_out = self.number("projection.d_in", d_in), self.number("projection.d_out", d_out)
        formula = MathTex(r"y = F(x) + W_s\,x", font_size=40, color=PALETTE["text"])
        formula.move_to(anchor)
        y, top = 0.35, 1.55
        x_label = MathTex(rf"x \in \mathbb{{R}}^{{{n_in}}}", font_size=34, color=PALETTE["text"]).move_to([-5.7, y, 0])
        add_node = make_add_node().move_to([3.0, y, 0])
        out_label = MathTex(rf"y \in \mathbb{{R}}^{{{n_out}}}", font_size=34, color=PALETTE["text"]).move_to([5.4, y, 0])
        boxes = VGroup(make_box(rf"{n_out}\times{n_in}", width=1.4, math=True), make_box(self.t("act"), width=1.0),
                       make_box(rf"{n_out}\times{n_out}", width=1.4, math=True)).arrange(RIGHT, buff=0.45)
        boxes.move_to([-0.6, top, 0])
        w_s = make_box(r"W_s", width=1.0, color=PALETTE["identity"], math=True).move_to([-0.6, y, 0])
        start, split = x_label.get_right() + RIGHT * 0.1, np.array([-4.6, y, 0])
        identity = VGroup(Line(start, w_s.get_left(), color=PALETTE["identity"], stroke_width=8),
                          Line(w_s.get_right(), add_node.get_left(), color=PALETTE["identity"], stroke_width=8))
        branch = VMobject(color=PALETTE["branch"], stroke_width=3).set_points_as_corners([
            split, [-4.6, top, 0], boxes.get_left(), boxes.get_right(), [3.0, top, 0], add_node.get_top()])
        out_arrow = Arrow(add_node.get_right(), out_label.get_left(), buff=0.1, color=PALETTE["text"])
        w_s_shape = MathTex(rf"W_s \in \mathbb{{R}}^{{{n_out} \times {n_in}}}", font_size=30,
                            color=PALETTE["identity"]).next_to(w_s, DOWN, buff=0.2)
        diagram = VGroup(x_label, identity, branch, boxes, w_s, add_node, out_arrow, out_label, w_s_shape)
        lines = VGroup(
            self.text("proj_why", size=SIZE_LABEL),
            self.text("proj_cost", size=SIZE_LABEL, color=PALETTE["identity"],
                      params=self.number("projection.params", params), d_out=n_out, d_in=n_in),
            self.text("proj_use", size=SIZE_LABEL),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.2).move_to([0, -2.2, 0]).to_edge(LEFT, buff=0.5)
        return {"formula": formula, "diagram": diagram, "lines": lines}
