"""DoesItOnlyCopy: does a residual net only learn to copy? ||F(x)|| / ||x|| per block over training.

Example::

    python render.py render DoesItOnlyCopy --quality l --set seeds=0,1,2,3,4

The study note's answer: early in training the net finds the identity quickly, then the gradient pushes
F(x) to capture the differences that lower the loss. The scene shows what a real run did instead of
repeating that: the ratio ||F(x)|| / ||x|| of every block at every recorded step (the trace's
``branch_norm`` / ``input_norm``) beside the training loss, and says in words where F(x) started, whether
it shrank toward the identity, whether it grew again, and on how many of the experiment's ``seeds`` the course
was the same (:func:`simulation.summary.ratio_course`; seeds 0-4 unless ``--set seeds=...`` says otherwise).
"""

from __future__ import annotations

import numpy as np
from manim import DL, DOWN, LEFT, UP, UR, Create, FadeIn, VGroup, VMobject, config, linear

from scenes.kit.base import LectureScene
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.seeds import SeedSpread, count_true
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import LinearAxes, LogAxes, make_legend
from simulation.summary import ratio_course

__all__ = ["DoesItOnlyCopy", "branch_ratios", "NEAR_ZERO"]

# F(x) "vanishes" (the block has become a copy) below this fraction of ||x||.
NEAR_ZERO = 0.05


def branch_ratios(trace) -> np.ndarray:
    """||F(x)|| / ||x|| of every block at every record: float64 [T, depth]."""
    return np.asarray(trace["branch_norm"], np.float64) / np.asarray(trace["input_norm"], np.float64)


class DoesItOnlyCopy(SeedSpread, LectureScene):
    """||F(x)|| / ||x|| per block over training steps beside the loss: does the residual net only copy?"""

    experiment = "does_it_copy"
    experiment_defaults = {"seeds": (0, 1, 2, 3, 4)}  # the claim's five seeds (docs/reference/claims.md); ~4 s of training each
    # one run per seed: no sibling says which arrays a trace lacks, so the scene names the ones it draws
    required_arrays = ("loss", "branch_norm", "input_norm")

    def construct(self) -> None:
        shown = self.traces["residual"]  # the first seed's run, drawn in full
        courses = {seed: ratio_course(branch_ratios(traces["residual"]).mean(1))
                   for seed, traces in self.seed_traces.items() if "residual" in traces}
        course = next(iter(courses.values()))
        for seed, c in courses.items():
            for figure in ("start", "low", "end"):
                self.number(f"residual.seed.{seed}.course.{figure}", c[figure])
        agree, total = count_true(c["course"] == course["course"] for c in courses.values())
        ratios = branch_ratios(shown)
        steps = np.asarray(shown["step"], np.float64)
        depth = ratios.shape[1]
        mean = ratios.mean(1)
        for i, step in enumerate(steps):
            self.number(f"step.{int(step)}.mean_ratio", mean[i])
        for l in range(depth):
            self.number(f"block.{l}.ratio_step0", ratios[0, l])
            self.number(f"block.{l}.ratio_final", ratios[-1, l])
        n_agree, n_total = self.number("seeds.agree", agree, 6), self.number("seeds.total", total, 6)

        # 1. Title and the question.
        title = self.title("title")
        self.narrate("n_intro", 3.5)
        self.play(FadeIn(title), run_time=1.2)

        # 2. The ratio of every block, drawn as it trains. Laid out before anything is drawn: the verdict of step 4
        # (measured now) sits at the bottom, the charts above it (raised, and shorter, where it needs the room).
        loss = np.asarray(shown["loss"], np.float64)
        verdict_args = (course, steps, loss, depth, n_agree, n_total, total)
        with self.unrecorded():  # recorded in step 4's beat, where it is shown
            verdict_height = self._verdict_lines(*verdict_args).height
        verdict_top = -config.frame_y_radius + 0.55 + verdict_height
        last = float(steps[-1]) or 1.0
        top = float(np.ceil(np.nanmax(ratios) * 4 + 1e-9) / 4) or 0.25
        height, chart_y = self._chart_height, self._chart_y
        for _ in range(3):  # as planned; again, raised and (where that is not enough) shorter, if the verdict needs it
            chart = LinearAxes((0, last), (0, top), width=5.2, height=height).move_to([-3.3, chart_y, 0])
            heading = self.text("ratio_panel", size=SIZE_LABEL).next_to(chart, UP, buff=0.2)
            x_label = self.text("axis_step", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.08)
            short = verdict_top + self._gap - x_label.get_bottom()[1]  # how far the verdict reaches up past the label
            if short <= 1e-9:
                break
            lift = min(short, max(0.0, title.get_bottom()[1] - self._gap - heading.get_top()[1]))
            shorter = min(short - lift, height - self._chart_height / 2)  # never below half the planned height
            height, chart_y = height - shorter, chart_y + lift + shorter / 2  # the chart's top: up by lift
        shades = [PALETTE["branch"].interpolate(PALETTE["residual"], l / max(depth - 1, 1)) for l in range(depth)]
        lines = [chart.polyline(steps, ratios[:, l], color=shade, stroke_width=2) for l, shade in enumerate(shades)]
        mean_line = chart.polyline(steps, mean, color=PALETTE["identity"], stroke_width=5)
        first_name, last_name = self.end_block_names(depth)
        legend = make_legend([(self.t("first_block", name=first_name), shades[0]),
                              (self.t("last_block", depth=depth, name=last_name), shades[-1]),
                              (self.t("mean"), PALETTE["identity"])], size=SIZE_SMALL)
        legend.next_to(chart.axes.get_corner(UR), DL, buff=0.15)
        self.narrate("n_ratio", 4)
        self.play(Create(chart), FadeIn(heading), FadeIn(x_label), run_time=1.2)
        self.play(*[Create(line, rate_func=linear) for line in [*lines, mean_line]], run_time=4)
        self.play(FadeIn(legend), run_time=0.6)

        # 3. The loss of the same run, on a log scale.
        for i, step in enumerate(steps):
            self.number(f"step.{int(step)}.loss", loss[i])
        finite = loss[np.isfinite(loss) & (loss > 0)]
        exp_range = ((int(np.floor(np.log10(finite.min()))), int(np.ceil(np.log10(finite.max()))))
                     if finite.size else (-1, 1))  # no loss at all: an empty chart with a labelled gap
        if exp_range[0] == exp_range[1]:
            exp_range = (exp_range[0] - 1, exp_range[1])
        loss_chart = LogAxes((0, last, last), exp_range, width=4.6, height=height).move_to([3.9, chart_y, 0])
        loss_heading = self.text("loss_panel", size=SIZE_LABEL).next_to(loss_chart, UP, buff=0.2)
        loss_x = self.text("axis_step", size=SIZE_SMALL, color=PALETTE["muted"])
        for tick in (0.0, last):  # LogAxes labels only its y axis
            loss_chart.ticks.add(make_text(f"{tick:g}", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(
                loss_chart.point(tick, 10.0 ** exp_range[0]), DOWN, buff=0.1))
        loss_x.next_to(loss_chart, DOWN, buff=0.08)
        if np.isnan(loss).any():  # a missing loss is a labelled gap, never bridged
            loss_line = loss_chart.polyline(steps, loss, color=PALETTE["residual"], stroke_width=4, what="residual.loss")
        else:
            pts = [loss_chart.point(s, v) for s, v in zip(steps, loss) if np.isfinite(v)]
            loss_line = VMobject(color=PALETTE["residual"], stroke_width=4).set_points_as_corners(
                pts if len(pts) > 1 else pts * 2)
        self.narrate("n_loss", 3)
        self.play(Create(loss_chart), FadeIn(loss_heading), FadeIn(loss_x), run_time=1.0)
        self.play(Create(loss_line, rate_func=linear), run_time=2.5)

        # 4. The verdict, computed from the run and checked on every seed.
        lines = self._verdict_lines(*verdict_args)
        lines.to_edge(LEFT, buff=EDGE_BUFF).to_edge(DOWN, buff=0.55)  # never shrunk: the legibility floor
        self.narrate("n_verdict", 3)
        self.play(FadeIn(lines, shift=UP * 0.2), run_time=1.2)
        self.cite("He et al. 2015, §3.1, Fig. 7")
        self.wait(5)

    _chart_y = 0.45  # centre y of both charts (raised where the verdict needs the room: step 2)
    _chart_height = 2.7  # their height (shorter where raising them is not enough)
    _gap = 0.15  # the least space between the verdict and the words above it

    def _verdict_lines(self, course: dict, steps, loss, depth: int, n_agree: str, n_total: str, total: int) -> VGroup:
        """The verdict's lines (not placed), their numbers recorded (unless :meth:`unrecorded`)."""
        settle = int(course["settle_index"])
        return VGroup(
            self.wrapped("start", size=SIZE_SMALL, start=self.number("course.start", course["start"]), depth=depth,
                      low=self.number("course.low", course["low"]),
                      low_step=self.number("course.low_step", steps[course["low_index"]], 6),
                      last=self.number("course.last_step", steps[-1], 6), end=self.number("course.end", course["end"])),
            self.wrapped(course["course"], size=SIZE_SMALL, color=PALETTE["identity"],
                      settle=self.number("course.settle_step", steps[settle], 6),
                      loss0=self.number("course.loss_step0", loss[0]),
                      loss=self.number("course.loss_at_settle" if course["course"] == "shrinks" else "course.loss_final",
                                       loss[settle] if course["course"] == "shrinks" else loss[-1])),
            self.wrapped("not_copy" if course["low"] >= NEAR_ZERO else "copy", size=SIZE_SMALL,
                      low=self.number("course.low", course["low"]), zero=f"{NEAR_ZERO:g}"),
            *([self.text("seeds", size=SIZE_SMALL, color=PALETTE["muted"], n=n_agree, total=n_total)]
              if self.seed_line_shown(total) else []),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.1)

    def seed_line_shown(self, total: int) -> bool:
        """Whether the verdict ends with "Same course on k of N seeds" (the lecture's claim: always)."""
        return True

    def end_block_names(self, depth: int) -> tuple[str, str]:
        """Names of the first and the last block for the legend (``{name}`` in its strings; unused here)."""
        return "1", str(depth)
