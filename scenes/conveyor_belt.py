"""ConveyorBelt: how much of a token's input vector survives the Transformer's residual stream.

Example::

    python render.py render ConveyorBelt --quality l --set seeds=0,1,2,3,4

The study note: attention is the factory, the residual is the conveyor belt: goods reach the end as they
were while stations along the belt improve them. The ``conveyor_belt`` experiment trains Post-LN
(x = LN(x + F(x)), Vaswani et al. 2017) and Pre-LN (x = x + F(LN(x)), Xiong et al. 2020) Transformers and
records, for every encoder layer, the mean over tokens of the cosine similarity between a token's vector at
the input of the stack (embedding + position) and after that layer (``input_cos``). The scene draws it layer
by layer at initialisation and after training, for both placements (the first seed), and counts the
experiment's ``seeds`` (0, 1, 2 unless ``--set seeds=...`` says otherwise) on which the Pre-LN belt kept more
of the input at the top of the encoder.
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, Dot, FadeIn, MathTex, VGroup, VMobject, Write

from scenes.kit.base import LectureScene
from scenes.kit.helpers import compare, finite_runs
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.seeds import SeedSpread, count_true
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, RoleColors
from scenes.kit.widgets import GapMark, LinearAxes, make_dashed_polyline, make_legend

__all__ = ["ConveyorBelt", "encoder_cos", "NORM_COLORS"]

NORM_COLORS = RoleColors(post_ln="plain", pre_ln="residual")  # read from the theme at draw time


def encoder_cos(trace, record: int) -> np.ndarray:
    """cos(x_0, x_l) for l = 0..L over the encoder at one record: float64 [L + 1], 1 first (x_0 itself)."""
    layers = trace.meta.layers
    enc = [i for i, name in enumerate(layers) if name.startswith("encoder.")]
    return np.concatenate([[1.0], np.asarray(trace["input_cos"][record], np.float64)[enc]])


def _dashed_with_gaps(chart: LinearAxes, xs: np.ndarray, ys: np.ndarray, color, what: str) -> VMobject:
    """The dashed line through (xs, ys) on ``chart``; where ys is missing (NaN) a labelled GapMark
    instead of a dashed bridge (the dashes are drawn per run of present values)."""
    ys = np.asarray(ys, np.float64)
    if not np.isnan(ys).any():
        return make_dashed_polyline([chart.point(x, y) for x, y in zip(xs, ys)], color, 3, 30)
    line = VGroup()
    for a, b in finite_runs(ys):
        points = [chart.point(x, y) for x, y in zip(xs[a:b], ys[a:b])]
        if len(points) == 1:
            line.add(Dot(points[0], radius=0.04, color=color))
        else:
            line.add(make_dashed_polyline(points, color, 3, max(2, 30 * (b - a - 1) // max(len(ys) - 1, 1))))
    line.add(*[m for m in chart.polyline(xs, ys, color=color, what=what).submobjects if isinstance(m, GapMark)])
    return line


class ConveyorBelt(SeedSpread, LectureScene):
    """Cosine similarity of a token's vector at the stack input and after each encoder layer, Post-LN vs Pre-LN."""

    _source = "Vaswani et al. 2017, Fig. 1; Xiong et al. 2020, Fig. 1"  # cited on screen

    experiment = "conveyor_belt"
    experiment_defaults = {"seeds": (0, 1, 2)}  # two Transformers per seed (~25 s each): three keep the lecture fast

    def construct(self) -> None:
        shown = {norm: self.traces[norm] for norm in ("post_ln", "pre_ln")}  # the first seed, drawn in full
        cos = {norm: (encoder_cos(t, 0), encoder_cos(t, -1)) for norm, t in shown.items()}
        depth = len(cos["pre_ln"][0]) - 1
        for norm, (init, trained) in cos.items():
            for l in range(depth + 1):
                self.number(f"{norm}.layer.{l}.cos_step0", init[l])
                self.number(f"{norm}.layer.{l}.cos_final", trained[l])
        top = {}  # {(norm, record): {seed: cos(x_0, x_L)}} of every seed that has the run
        for norm in shown:
            for record, when in ((0, "step0"), (-1, "final")):
                top[norm, record] = self.across_seeds(norm, lambda t: encoder_cos(t, record)[-1])
                for seed, value in top[norm, record].items():
                    self.number(f"{norm}.seed.{seed}.top_cos_{when}", value)
        both = [seed for seed in top["pre_ln", -1] if seed in top["post_ln", -1]]
        verdicts = [compare(top["pre_ln", -1][seed], top["post_ln", -1][seed]) for seed in both]
        agree, total = count_true(v for v in verdicts if v is not None)  # a seed with a missing top value is not counted
        step = self.number("step", shown["pre_ln"]["step"][-1], 6)

        # 1. Title and the note's picture; the two placements.
        title = self.title("title")
        picture = self.text("picture", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(title, DOWN, buff=0.15)
        self.narrate("n_intro", 3.5)
        self.play(FadeIn(title), FadeIn(picture), run_time=1.2)
        post_tex = MathTex(r"x_{l+1} = \mathrm{LN}(x_l + F(x_l))", font_size=30, color=NORM_COLORS["post_ln"])
        pre_tex = MathTex(r"x_{l+1} = x_l + F(\mathrm{LN}(x_l))", font_size=30, color=NORM_COLORS["pre_ln"])
        placements = VGroup(post_tex, pre_tex).arrange(RIGHT, buff=1.0).next_to(picture, DOWN, buff=0.25)
        self.narrate("n_post", 3)
        self.play(Write(post_tex), run_time=1.2)
        self.narrate("n_pre", 3)
        self.play(Write(pre_tex), run_time=1.2)

        # 2. cos(x_0, x_l) layer by layer: dashed at init, solid after training.
        present = np.concatenate([c for pair in cos.values() for c in pair])
        present = present[np.isfinite(present)]
        low = min(0.0, float(np.floor(present.min() * 10) / 10)) if present.size else 0.0
        chart = LinearAxes((0, depth), (low, 1.0), width=6.4, height=2.5, x_ticks=list(range(depth + 1)),
                           x_format=lambda v: f"{v:g}").move_to([-1.75, -0.5, 0])
        x_label = self.text("axis_layer", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.1)
        y_label = self.text("axis_cos", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, LEFT, buff=0.15)
        layers = np.arange(depth + 1, dtype=np.float64)
        init_lines, trained_lines, dots = [], [], VGroup()
        for norm, (init, trained) in cos.items():
            color = NORM_COLORS[norm]
            init_lines.append(_dashed_with_gaps(chart, layers, init, color, f"{norm}.input_cos[step0]"))
            trained_lines.append(chart.polyline(layers, trained, color=color, stroke_width=5,
                                                what=f"{norm}.input_cos[final]"))
            dots.add(*[Dot(chart.point(x, y), radius=0.06, color=color) for x, y in zip(layers, trained)
                       if np.isfinite(y)])
        legend = make_legend([(self.t("post_ln"), NORM_COLORS["post_ln"]), (self.t("pre_ln"), NORM_COLORS["pre_ln"])],
                             size=SIZE_LABEL)
        notes = VGroup(self.text("init", size=SIZE_SMALL, color=PALETTE["muted"]),
                       self.text("trained", size=SIZE_SMALL, color=PALETTE["muted"], step=step)
                       ).arrange(DOWN, aligned_edge=LEFT, buff=0.08)
        VGroup(legend, notes).arrange(DOWN, aligned_edge=LEFT, buff=0.25).next_to(chart, RIGHT, buff=0.4)
        self.narrate("n_measure", 4.5)
        self.play(Create(chart), FadeIn(x_label), FadeIn(y_label), FadeIn(legend), run_time=1.2)
        self.play(*[Create(line) for line in init_lines], FadeIn(notes[0]), run_time=2)
        self.play(*[Create(line) for line in trained_lines], FadeIn(dots), FadeIn(notes[1]), run_time=2.5)

        # 3. The verdict, computed from the runs and counted over the seeds.
        verdict = VGroup(
            self.wrapped("top", size=SIZE_SMALL, layers=depth,
                      pre=self.number("pre_ln.top_cos_final", cos["pre_ln"][1][-1]),
                      post=self.number("post_ln.top_cos_final", cos["post_ln"][1][-1]),
                      pre0=self.number("pre_ln.top_cos_step0", cos["pre_ln"][0][-1]),
                      post0=self.number("post_ln.top_cos_step0", cos["post_ln"][0][-1])),
            self.wrapped("pre_keeps", size=SIZE_SMALL, color=PALETTE["identity"],
                      n=self.number("seeds.pre_keeps_more", agree, 6), total=self.number("seeds.total", total, 6)),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.1)
        verdict.to_edge(LEFT, buff=EDGE_BUFF).to_edge(DOWN, buff=0.55)
        self.above_citation(verdict, self._source)
        self.narrate("n_verdict", 3)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite(self._source)
        self.wait(5)
