"""Summary: the lecture in one line: an identity fast lane plus a learnable side road.

Example::

    python render.py render Summary --quality l --lang zh

The forward pass keeps x on the identity path and adds what the branch learned, H(x) = x + F(x)
(He et al. 2015, Eq. 1); the backward pass brings the gradient home on the same path, dL/dx =
dL/dy (1 + dF/dx) (He et al. 2016, Eq. 5). Two measured facts from the ``chain_rule`` experiment close
the lecture: the first-over-last block gradient ratio at step 0 and the final training loss, plain vs
residual.
"""

from __future__ import annotations

from manim import DOWN, LEFT, RIGHT, UP, Create, Dot, FadeIn, FadeOut, Line, MathTex, MoveAlongPath, VGroup

from simulation.experiments import PLAIN, RESIDUAL

from scenes.kit.base import LectureScene
from scenes.kit.style import PALETTE, SIZE_BODY, SIZE_LABEL, SIZE_SMALL
from scenes.kit.widgets import make_highway_icon

__all__ = ["Summary"]


class Summary(LectureScene):
    """One line: a residual connection is an identity fast lane plus a learnable side road."""

    experiment = "chain_rule"
    strings = {
        "title": {"en": "In one line", "zh": "一句话总结"},
        "lead": {"en": "A residual connection =", "zh": "残差连接 ="},
        "lane": {"en": "an identity fast lane", "zh": "恒等快车道"},
        "plus": {"en": "+", "zh": "+"},
        "road": {"en": "a learnable side road", "zh": "可学习的辅路"},
        "lane_label": {"en": "x passes unchanged; gradients come back on it", "zh": "x 原样通过；梯度也沿它返回"},
        "road_label": {"en": "F(x) learns only the correction", "zh": "F(x) 只学修正量"},
        "facts": {"en": "measured ({depth} sigmoid blocks, digits):", "zh": "实测（{depth} 个 sigmoid 块，digits 数据）："},
        "grad": {"en": "gradient, first / last block at step 0:   plain {plain}   residual {residual}",
                 "zh": "第 0 步第一块 / 最后一块的梯度：普通 {plain}   残差 {residual}"},
        "loss": {"en": "training loss at step {steps}:   plain {plain}   residual {residual}",
                 "zh": "第 {steps} 步的训练损失：普通 {plain}   残差 {residual}"},
        "n_line": {"en": "In one line: a residual connection is an identity fast lane plus a learnable side road.",
                   "zh": "一句话：残差连接就是一条恒等快车道，加上一条可学习的辅路。"},
        "n_forward": {"en": "Forward, the input stays on the fast lane, and the side road adds what it learned.",
                      "zh": "前向时，输入留在快车道上，辅路只把学到的东西加上去。"},
        "n_backward": {"en": "Backward, the gradient comes home on the same lane.",
                       "zh": "反向时，梯度沿着同一条快车道回来。"},
        "n_facts": {"en": "That is what our runs measured: the gradient survives, and the deep net trains.",
                    "zh": "这正是我们的实验测到的：梯度保留下来，深网络训练得动。"},
    }

    def construct(self) -> None:
        plain, residual = self.traces[PLAIN], self.traces[RESIDUAL]
        depth, steps = plain.run_config.depth, plain["step"][-1]  # NaN if the record is missing
        ratios = {name: float(t["grad_norm"][0, 0] / t["grad_norm"][0, -1]) for name, t in
                  (("plain", plain), ("residual", residual))}
        losses = {name: float(t["loss"][-1]) for name, t in (("plain", plain), ("residual", residual))}

        # 1. The one line, with its two parts in the colours of the two paths.
        title = self.title("title")
        lead = self.text("lead", size=SIZE_BODY)
        parts = VGroup(self.text("lane", size=SIZE_BODY + 4, color=PALETTE["identity"]),
                       self.text("plus", size=SIZE_BODY + 4),
                       self.text("road", size=SIZE_BODY + 4, color=PALETTE["branch"])).arrange(RIGHT, buff=0.25)
        line = VGroup(lead, parts).arrange(DOWN, buff=0.2).next_to(title, DOWN, buff=0.35)
        self.narrate("n_line", 5)
        self.play(FadeIn(title), FadeIn(lead), run_time=1)
        self.play(FadeIn(parts[0], shift=RIGHT * 0.3), run_time=1)
        self.play(FadeIn(parts[1]), FadeIn(parts[2], shift=RIGHT * 0.3), run_time=1)
        self.wait(1)

        # 2. The picture: the lane and the road, and H(x) = x + F(x) above them.
        main, ramp = make_highway_icon(length=9.0, ramp_height=1.0, lane_width=12, ramp_width=5)
        road = VGroup(main, ramp).move_to([0, -0.2, 0])
        x_in = MathTex("x", font_size=40, color=PALETTE["identity"]).next_to(main, LEFT, buff=0.2)
        h_out = MathTex("x + F(x)", font_size=40, color=PALETTE["text"]).next_to(main, RIGHT, buff=0.2)
        lane_label = self.text("lane_label", size=SIZE_SMALL, color=PALETTE["identity"])
        lane_label.next_to(main, DOWN, buff=0.2)
        road_label = self.text("road_label", size=SIZE_SMALL, color=PALETTE["branch"])
        road_label.next_to(ramp, UP, buff=0.12)
        self.narrate("n_forward", 4.5)
        self.play(Create(main), FadeIn(x_in), FadeIn(lane_label), run_time=1.2)
        self.play(Create(ramp), FadeIn(road_label), run_time=1.2)
        cars = [Dot(color=PALETTE["identity"], radius=0.1), Dot(color=PALETTE["branch"], radius=0.1)]
        self.play(MoveAlongPath(cars[0], main), MoveAlongPath(cars[1], ramp), run_time=2)
        self.play(FadeIn(h_out), *[FadeOut(car) for car in cars], run_time=0.6)

        # 3. Backward: the gradient rides the lane from the output back to the input.
        self.narrate("n_backward", 3)
        back = Line(main.get_end(), main.get_start())
        grad = Dot(color=PALETTE["grad"], radius=0.12)
        self.play(MoveAlongPath(grad, back), run_time=2)
        self.play(FadeOut(grad), run_time=0.3)

        # 4. Two measured facts from the chain_rule runs.
        facts = VGroup(
            self.text("facts", size=SIZE_LABEL, depth=depth),
            self.text("grad", size=SIZE_LABEL, plain=self.number("plain.first_over_last_grad_norm", ratios["plain"]),
                      residual=self.number("residual.first_over_last_grad_norm", ratios["residual"])),
            self.text("loss", size=SIZE_LABEL, steps=self.number("steps", steps),
                      plain=self.number("plain.final_loss", losses["plain"]),
                      residual=self.number("residual.final_loss", losses["residual"])),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.12)
        facts.next_to(lane_label, DOWN, buff=0.4).to_edge(LEFT, buff=0.6)
        self.narrate("n_facts", 4)
        self.play(FadeIn(facts), run_time=1.2)
        self.cite("He et al. 2015, Eq. 1; He et al. 2016, Eq. 5")
        self.wait(3.5)
