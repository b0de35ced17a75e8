"""ResidualResponse: how large the residual branch F(x) is next to its input x, block by block.

Example::

    python render.py render ResidualResponse --quality l

He et al. 2015, Fig. 7: the responses (std of each layer's output) of ResNets are smaller than those
of their plain counterparts: a residual block learns a small correction to the identity. The scene
shows the measured ratio ||F(x)|| / ||x|| per block at initialisation and after training, and the std
of F(x), and says in words whether the run agrees with the paper. The bars are the first seed's nets; a
dot per other seed (``--set seeds=...``, default three) sits on each bar, and each verdict says on how
many seeds it holds.
"""

from __future__ import annotations

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Create, FadeIn, GrowFromEdge, MathTex, ReplacementTransform, Transform, VGroup, Write)

from simulation.experiments import PLAIN, RESIDUAL

from scenes.kit.base import LectureScene
from scenes.kit.helpers import compare, finite_max, strict_mean
from scenes.kit.layout import EDGE_BUFF, inside_margin, line_width
from scenes.kit.seeds import SeedSpread, bar_seed_dots, with_seed_count
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, make_wrapped_text
from scenes.kit.widgets import GroupedBars, make_dashed_polyline, make_legend

__all__ = ["ResidualResponse", "response_ratio"]


def response_ratio(trace, record: int = -1) -> np.ndarray:
    """||F(x)|| / ||x|| of every block at one record: float64 [depth] (for a plain net F(x) = h)."""
    return np.asarray(trace["branch_norm"][record], np.float64) / np.asarray(trace["input_norm"][record], np.float64)


class ResidualResponse(SeedSpread, LectureScene):
    """||F(x)|| / ||x|| and the std of F(x) per block of trained plain and residual nets (He 2015, Fig. 7)."""

    _source = "He et al. 2015, Fig. 7"  # the paper cited on screen (and by the explorer, cli/explore.py)
    experiment = "residual_response"

    def construct(self) -> None:
        plain, residual = self.traces[PLAIN], self.traces[RESIDUAL]
        depth = len(residual["branch_norm"][0])
        step = self.number("step", residual["step"][-1], digits=6)
        ratios = {name: (response_ratio(t, 0), response_ratio(t, -1)) for name, t in (("plain", plain),
                                                                                       ("residual", residual))}
        stds = {name: np.asarray(t["branch_std"][-1], np.float64) for name, t in (("plain", plain),
                                                                                  ("residual", residual))}
        for name in ("plain", "residual"):
            for l in range(depth):
                self.number(f"{name}.block.{l}.ratio_step0", ratios[name][0][l])
                self.number(f"{name}.block.{l}.ratio", ratios[name][1][l])
                self.number(f"{name}.block.{l}.branch_std", stds[name][l])
        colors = (PALETTE["plain"], PALETTE["residual"])
        # Every seed's trained ratios and stds (the first seed's are the bars; the others are dots).
        seed_ratio = {name: self.across_seeds_array(name, lambda t: response_ratio(t, -1)) for name in ("plain", "residual")}
        seed_std = {name: self.across_seeds_array(name, lambda t: np.asarray(t["branch_std"][-1], np.float64))
                    for name in ("plain", "residual")}
        others = self.other_seeds()
        for name in ("plain", "residual"):
            for seed in others:
                for l in range(depth):
                    if seed in seed_ratio[name]:
                        self.number(f"{name}.seed.{seed}.block.{l}.ratio", seed_ratio[name][seed][l])
                        self.number(f"{name}.seed.{seed}.block.{l}.branch_std", seed_std[name][seed][l])

        # 1. Title, the ratio, and who is who.
        title = self.title("title")
        formula = MathTex(r"\frac{\lVert F(x_l) \rVert}{\lVert x_l \rVert}", font_size=36, color=PALETTE["text"])
        formula.move_to([-5.2, 2.35, 0])
        legend = make_legend([
            (self.t("legend_plain", error=self.number("plain.final_error", plain["error"][-1])), colors[0]),
            (self.t("legend_residual", error=self.number("residual.final_error", residual["error"][-1])), colors[1]),
        ], size=SIZE_LABEL).next_to(formula, RIGHT, buff=0.8)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), Write(formula), run_time=1.5)
        self.play(FadeIn(legend))

        # 2. The ratio per block at step 0, then after training (same scale for both). Laid out before anything
        # is drawn: the verdict of step 4 (measured now) goes under the blocks' names, above the citation.
        mean = {name: strict_mean(ratios[name][1]) for name in ratios}  # missing if any block is missing
        mean_std = {name: strict_mean(stds[name]) for name in stds}
        verdict_args = (residual, mean, mean_std, seed_ratio, seed_std)
        with self.unrecorded():  # recorded in step 4's beat, where it is shown
            verdict = VGroup(*[make_wrapped_text(line, line_width(), size=SIZE_LABEL)
                               for line in self._verdict(*verdict_args)]).arrange(DOWN, aligned_edge=LEFT, buff=0.15)
        ceiling = min(formula.get_bottom()[1], legend.get_bottom()[1]) - self._gap
        floor = self.cite_label(self._source).get_top()[1] + self._gap
        top = max(finite_max(np.concatenate([*ratios["plain"], *ratios["residual"]])), 1.0)  # 1 is drawn
        series = {"before": [ratios["plain"][0], ratios["residual"][0]],
                  "after": [ratios["plain"][1], ratios["residual"][1]], "std": [stds["plain"], stds["residual"]]}
        height, chart_y = self._chart_height, self._chart_y
        for _ in range(3):  # as planned; again, raised and (where that is not enough) shorter, if the verdict needs it
            charts = self._charts(series, colors, top, depth, height, chart_y, step, len(others))
            verdict_top = min(self._verdict_y + verdict.height / 2, charts["low"] - self._gap)
            short = floor - (verdict_top - verdict.height)  # how far the verdict reaches past the floor
            if short <= 1e-9 and charts["high"] <= ceiling + 1e-9:
                break
            short = max(short, 0.0)
            lift = min(short, max(0.0, ceiling - charts["high"]))
            drop = max(0.0, charts["high"] - ceiling)  # titles wrapped onto two lines (_charts) reach the formula
            shorter = min(short - lift + drop, height - self._chart_height / 2)  # never below half the planned height
            height, chart_y = height - shorter, chart_y + lift - drop + shorter / 2  # the charts' top: up by lift - drop
        before, after, std_chart = charts["before"], charts["after"], charts["std"]
        panel_title, block_label = charts["before_title"], charts["before_label"]
        level = before.level_line(1.0, PALETTE["muted"])
        level = make_dashed_polyline([level.get_start(), level.get_end()], PALETTE["muted"], stroke_width=2)
        level_label = self.text("same_size", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(level, RIGHT, buff=0.1)
        self.narrate("n_init", 2.5)
        self.play(Create(before.chart), FadeIn(panel_title), FadeIn(block_label), run_time=1.2)
        self.play(*[GrowFromEdge(bar, DOWN) for bar in [*before.bars[0], *before.bars[1]]],
                  Create(level), FadeIn(level_label), run_time=1.5)
        self.wait(1)
        self.narrate(self.verdict_key(mean["plain"], mean["residual"], "n_trained", "n_trained_large"), 4)
        trained_title = charts["trained_title"]
        self.play(ReplacementTransform(before.bars, after.bars), Transform(panel_title, trained_title), run_time=2.5)
        ratio_dots = [bar_seed_dots(after, s, {seed: seed_ratio[name][seed] for seed in others if seed in seed_ratio[name]})
                      for s, name in enumerate(("plain", "residual"))]
        if others:
            self.play(*[FadeIn(d) for d in ratio_dots], run_time=0.6)
        self.wait(1.5)

        # 3. He et al.'s own measure: the std of each response.
        std_title, std_label = charts["std_title"], charts["std_label"]
        self.narrate("n_std", 3)
        self.play(Create(std_chart.chart), FadeIn(std_title), FadeIn(std_label), run_time=1.2)
        self.play(*[GrowFromEdge(bar, DOWN) for bar in [*std_chart.bars[0], *std_chart.bars[1]]], run_time=1.5)
        std_dots = [bar_seed_dots(std_chart, s, {seed: seed_std[name][seed] for seed in others if seed in seed_std[name]})
                    for s, name in enumerate(("plain", "residual"))]
        if others:
            self.play(*[FadeIn(d) for d in std_dots], run_time=0.6)
        self.wait(1)

        # 4. The verdict, computed from the run (the text measured in step 2, its numbers recorded now).
        self._verdict(*verdict_args)
        verdict.to_edge(LEFT, buff=EDGE_BUFF).shift((verdict_top - verdict.get_top()[1]) * UP)
        if charts["note"] is not None:
            self.add(charts["note"])
        self.narrate("n_verdict", 3)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite(self._source)
        self.wait(5)

    def _charts(self, series: dict, colors, top: float, depth: int, height: float, chart_y: float, step: str,
                others: int) -> dict:
        """The three bar charts (``series``: "before", "after", "std"), ``height`` high and centred at ``chart_y``,
        with their titles, the words under them and the seed dots' note (None without other seeds), placed, not
        drawn; ``high``: the titles' top, ``low``: the lowest bottom under the charts (scene units)."""
        labels = self.bar_labels(depth)
        before, after = (GroupedBars(series[k], colors, width=4.6, height=height, y_max=top, labels=labels)
                         for k in ("before", "after"))
        std_chart = GroupedBars(series["std"], colors, width=4.6, height=height, labels=labels)
        for chart, x in ((before, -3.6), (after, -3.6), (std_chart, 3.7)):
            chart.move_to([x, chart_y, 0])
        # each title keeps to its half of the line (longer words: two lines, never shrunk), inside the margin
        before_title = inside_margin(self.heading("ratio_init", size=SIZE_LABEL).next_to(before.chart.axes, UP, buff=0.3))
        std_title = inside_margin(self.heading("std_title", size=SIZE_LABEL, step=step)
                                  .next_to(std_chart.chart.axes, UP, buff=0.3))
        trained_title = self.heading("ratio_trained", size=SIZE_LABEL, step=step).move_to(before_title)
        if trained_title.height > before_title.height + 1e-9:  # more lines than the title it replaces: up from it
            trained_title.align_to(before_title, DOWN)
        inside_margin(trained_title)
        before_label, std_label = self.block_axis(before), self.block_axis(std_chart)
        note = None
        if others:
            note = self.text("seed_dots", size=SIZE_SMALL, color=PALETTE["muted"], m=others)
            note.next_to(std_label, DOWN, buff=0.08).align_to(std_chart.chart.axes, RIGHT)
        under = [before_label, std_label, *([note] if note is not None else [])]
        return {"before": before, "after": after, "std": std_chart, "before_title": before_title,
                "trained_title": trained_title, "std_title": std_title, "before_label": before_label,
                "std_label": std_label, "note": note,
                "high": max(before_title.get_top()[1], std_title.get_top()[1],
                            *([trained_title.get_top()[1]] if trained_title.height > before_title.height + 1e-9 else [])),
                "low": min(m.get_bottom()[1] for m in under)}

    def _verdict(self, residual, mean: dict, mean_std: dict, seed_ratio: dict, seed_std: dict) -> list[str]:
        """The verdict's two sentences (on the ratio, on the std), their numbers recorded (unless
        :meth:`unrecorded`)."""
        ratio_key = self.verdict_key(mean["plain"], mean["residual"], "ratio_small", "ratio_not_small")
        std_key = self.verdict_key(mean_std["plain"], mean_std["residual"], "std_agrees", "std_differs")
        why = self.bn_note(residual)
        seeds_smaller = {}  # claim -> (k, n): seeds where the residual mean is below the plain one
        for claim, by_seed in (("ratio", seed_ratio), ("branch_std", seed_std)):
            means = {name: {seed: strict_mean(v) for seed, v in by_seed[name].items()} for name in by_seed}
            for name in means:
                for seed, value in means[name].items():
                    self.number(f"{name}.seed.{seed}.mean_{claim}", value)
            both = [s for s in means["plain"] if s in means["residual"]]
            seeds_smaller[claim] = self.seed_count(f"residual.smaller_{claim}",
                                                   [compare(means["plain"][s], means["residual"][s]) for s in both])
        ratio = self.t(ratio_key, residual=self.number("residual.mean_ratio", mean["residual"]),
                       plain=self.number("plain.mean_ratio", mean["plain"]))
        std = self.t(std_key, residual=self.number("residual.mean_branch_std", mean_std["residual"]),
                     plain=self.number("plain.mean_branch_std", mean_std["plain"]), why=why)
        return [with_seed_count(self, ratio, *seeds_smaller["ratio"]),
                with_seed_count(self, std, *seeds_smaller["branch_std"])]

    # -- what a variant changes ---------------------------------------------------------------------
    _chart_y = -0.25  # centre y of both bar charts (raised where the verdict needs the room: step 2)
    _chart_height = 2.3  # their height (shorter where raising them is not enough)
    _verdict_y = -2.75  # centre y of the verdict, or lower: under the words under the charts
    _gap = 0.15  # the least space between the verdict and what is above or below it

    def bar_labels(self, depth: int) -> list[str] | None:
        """The labels under the bars (None: 1..depth, thinned by GroupedBars)."""
        return None

    def block_axis(self, bars: GroupedBars):
        """What is written under ``bars`` (placed): the word "block"."""
        return self.text("axis_block", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(bars, DOWN, buff=0.1)

    def bn_note(self, residual) -> str:
        """Why the std may differ from the paper's: these MLPs have no BatchNorm (the paper measures after BN)."""
        return self.t("no_bn") if getattr(residual.run_config, "norm", "none") == "none" else ""
