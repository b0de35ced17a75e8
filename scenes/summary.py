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
