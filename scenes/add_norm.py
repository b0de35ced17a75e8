"""TransformerAddNorm: the residual connection inside the Transformer, one Add & Norm per sublayer.

Example::

    python render.py render TransformerAddNorm --quality l

Vaswani et al. 2017, Fig. 1 and §3.1: every sublayer of an encoder layer (self-attention, feed-forward) and
of a decoder layer (masked self-attention, cross-attention over the encoder output, feed-forward) is wrapped
as LayerNorm(x + Sublayer(x)). The scene draws both layers, sends data through the sublayer and the identity
path of each Add & Norm, and prints what a trained Post-LN model of the ``layernorm`` experiment measured
there: ||Sublayer(x)|| / ||x|| and the length of each token after the Norm.
"""

from __future__ import annotations

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Arrow, Create, Dot, FadeIn, Indicate, MathTex, MoveAlongPath, VGroup,
                   VMobject, Write)

from simulation.experiments import POST_LN_WARMUP

from scenes.kit.base import LectureScene
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import make_box

__all__ = ["TransformerAddNorm", "make_layer_column", "sublayer_readout"]

BOX_W, BOX_H, GAP = 3.0, 0.46, 0.3  # 3.0: "Multi-Head Attention" at SIZE_LABEL, unshrunk (the legibility floor)
ENC_X, DEC_X, MEMORY_X = -4.6, 1.75, -0.35  # column centres and the x of the encoder-output line


def sublayer_readout(trace, sublayer: str, record: int = -1) -> tuple[float, float]:
    """(||Sublayer(x)|| / ||x||, ||output of the Add & Norm||) of the sublayer called ``sublayer`` (a name in
    ``trace.meta.sublayers``, e.g. ``"decoder.0.cross_attn"``) at record ``record``; mean token norms."""
    index = trace.meta.sublayers.index(sublayer)
    branch = float(trace["branch_norm"][record][index])
    x = float(trace["input_norm"][record][index])
    return branch / x, float(trace["out_norm"][record][index])


def make_layer_column(labels: list[str], x: float, y_bottom: float, bypass_side: int, add_norm: str
                      ) -> tuple[VGroup, list[VGroup], list[VGroup], list[VMobject], list[VMobject]]:
    """A Transformer layer drawn bottom to top as in Vaswani Fig. 1: for each sublayer label, its box and an
    Add & Norm box above it, joined by arrows; the identity path of each sublayer runs on the side
    ``bypass_side`` (-1 left, +1 right) from below the sublayer into its Add & Norm.

    Returns (group, sublayer boxes, add & norm boxes, branch paths, identity paths); the paths run from the
    split point to the Add & Norm box, for MoveAlongPath.
    """
    group, subs, norms, branch_paths, identity_paths = VGroup(), [], [], [], []
    y = y_bottom
    side_x = x + bypass_side * (BOX_W / 2 + 0.3)
    for label in labels:
        split = np.array([x, y, 0])
        sub = make_box(label, width=BOX_W, height=BOX_H, color=PALETTE["branch"])
        sub.move_to([x, y + GAP + BOX_H / 2, 0])
        norm = make_box(add_norm, width=BOX_W, height=BOX_H, color=PALETTE["identity"])
        norm.move_to([x, sub.get_top()[1] + GAP + BOX_H / 2, 0])
        arrows = VGroup(
            Arrow(split, sub.get_bottom(), buff=0, stroke_width=3, max_tip_length_to_length_ratio=0.35,
                  color=PALETTE["branch"]),
            Arrow(sub.get_top(), norm.get_bottom(), buff=0, stroke_width=3, max_tip_length_to_length_ratio=0.35,
                  color=PALETTE["branch"]),
        )
        edge = norm.get_left() if bypass_side < 0 else norm.get_right()
        identity = VMobject(color=PALETTE["identity"], stroke_width=5).set_points_as_corners(
            [split, [side_x, y, 0], [side_x, edge[1], 0], edge])
        branch = VMobject().set_points_as_corners([split, sub.get_bottom(), sub.get_top(), norm.get_bottom()])
        group.add(arrows, sub, norm, identity)
        subs.append(sub)
        norms.append(norm)
        branch_paths.append(branch)
        identity_paths.append(identity)
        y = norm.get_top()[1]
    return group, subs, norms, branch_paths, identity_paths


class TransformerAddNorm(LectureScene):
    """An encoder layer (two Add & Norm) and a decoder layer (three), data flowing through (Vaswani 2017, Fig. 1)."""

    experiment = "layernorm"
    shown_run = POST_LN_WARMUP  # the Post-LN run that trained: Vaswani's placement

    def construct(self) -> None:
        if self.shown_run not in self.traces:
            raise KeyError(f"shown_run must be one of {', '.join(self.traces)}; got {self.shown_run!r}")
        trace = self.traces[self.shown_run]
        step = self.number("step", trace["step"][-1], digits=6)
        width = trace.run_config.width

        # 1. Title and Vaswani's one line.
        title = self.title("title")
        formula = MathTex(r"x \leftarrow \mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big)", font_size=34,
                          color=PALETTE["text"]).next_to(title, DOWN, buff=0.18)
        self.narrate("n_intro", 3.5)
        self.play(FadeIn(title), Write(formula), run_time=1.5)

        # 2. The encoder layer, bottom to top; its identity paths run on the left.
        add_norm = self.t("add_norm")
        enc, enc_subs, enc_norms, enc_branch, enc_identity = make_layer_column(
            [self.t("attn"), self.t("ffn")], x=ENC_X, y_bottom=-2.2, bypass_side=-1, add_norm=add_norm)
        enc_in = self.text("inputs", size=SIZE_SMALL, color=PALETTE["muted"]).next_to([ENC_X, -2.2, 0], DOWN, buff=0.12)
        enc_out = Arrow(enc_norms[-1].get_top(), enc_norms[-1].get_top() + UP * 0.45, buff=0, stroke_width=3,
                        max_tip_length_to_length_ratio=0.35, color=PALETTE["text"])
        enc_label = self.text("encoder", size=SIZE_LABEL, color=PALETTE["muted"]).next_to(enc_out, UP, buff=0.1)
        self.narrate("n_encoder", 3)
        self.play(Create(enc), FadeIn(enc_in), FadeIn(enc_label), Create(enc_out), run_time=2)

        # 3. Data through both roads of each Add & Norm.
        self.narrate("n_flow", 3)
        for branch, identity, norm in zip(enc_branch, enc_identity, enc_norms):
            self.flow(branch, identity, norm)

        # 4. The decoder layer: three sublayers, the middle one reads the encoder output.
        dec, dec_subs, dec_norms, dec_branch, dec_identity = make_layer_column(
            [self.t("masked"), self.t("cross"), self.t("ffn")], x=DEC_X, y_bottom=-3.2, bypass_side=1,
            add_norm=add_norm)
        dec_in = self.text("outputs_so_far", size=SIZE_SMALL, color=PALETTE["muted"])
        dec_in.next_to([DEC_X, -3.2, 0], DOWN, buff=0.12)
        dec_label = self.text("decoder", size=SIZE_LABEL, color=PALETTE["muted"]).next_to(dec_norms[-1], UP, buff=0.12)
        cross = dec_subs[1]
        top = enc_out.get_end()
        memory_path = VMobject(color=PALETTE["residual"], stroke_width=3).set_points_as_corners([
            top, [MEMORY_X, top[1], 0], [MEMORY_X, cross.get_left()[1], 0], cross.get_left()])
        memory_label = self.text("memory", size=SIZE_SMALL, color=PALETTE["residual"])
        memory_label.next_to([(enc_label.get_right()[0] + MEMORY_X) / 2, top[1], 0], UP, buff=0.08)
        self.narrate("n_decoder", 4.5)
        self.play(Create(dec), FadeIn(dec_in), FadeIn(dec_label), run_time=2)
        self.play(Create(memory_path), FadeIn(memory_label), run_time=1)
        for branch, identity, norm in zip(dec_branch, dec_identity, dec_norms):
            self.flow(branch, identity, norm)

        # 5. What a trained Post-LN model measured at each Add & Norm (layer 1 of each stack).
        self.narrate("n_numbers", 4)
        readouts = VGroup()
        names = [("encoder.0.attn", enc_norms[0], LEFT), ("encoder.0.ffn", enc_norms[1], LEFT),
                 ("decoder.0.self_attn", dec_norms[0], RIGHT), ("decoder.0.cross_attn", dec_norms[1], RIGHT),
                 ("decoder.0.ffn", dec_norms[2], RIGHT)]
        for name, norm, side in names:
            ratio, out = sublayer_readout(trace, name)
            text = VGroup(
                self.text("ratio", size=SIZE_SMALL, value=self.number(f"{name}.branch_to_input", ratio)),
                self.text("out", size=SIZE_SMALL, value=self.number(f"{name}.out_norm", out)),
            ).arrange(DOWN, aligned_edge=LEFT, buff=0.06)
            # right of each Add & Norm: clear of the encoder-output line and of the decoder's identity paths
            text.next_to(norm, RIGHT, buff=0.2 if side is LEFT else 0.6)
            readouts.add(text)
        caption = VGroup(self.text("measured", size=SIZE_SMALL, color=PALETTE["muted"], step=step),
                         self.text("length", size=SIZE_SMALL, color=PALETTE["muted"]))
        caption.arrange(DOWN, aligned_edge=LEFT, buff=0.08).to_corner(LEFT + DOWN, buff=[EDGE_BUFF, 0.3, 0])
        self.play(*[FadeIn(r, shift=LEFT * 0.1) for r in readouts], FadeIn(caption), run_time=1.5)
        note = self.text("norm_note", size=SIZE_SMALL, sqrt_d=self.number("sqrt_width", np.sqrt(width)))
        note.next_to(formula, DOWN, buff=0.15)
        self.play(FadeIn(note))
        self.cite("Vaswani et al. 2017, Fig. 1")
        self.wait(3)

    def flow(self, branch: VMobject, identity: VMobject, norm: VGroup) -> None:
        """One dot through the sublayer, one along the identity path; they meet at the Add & Norm."""
        dots = [Dot(color=PALETTE["branch"], radius=0.07), Dot(color=PALETTE["identity"], radius=0.07)]
        self.play(MoveAlongPath(dots[0], branch), MoveAlongPath(dots[1], identity), run_time=1.0)
        self.play(Indicate(norm, color=PALETTE["identity"], scale_factor=1.05), *[d.animate.set_opacity(0) for d in dots],
                  run_time=0.5)
        self.remove(*dots)
