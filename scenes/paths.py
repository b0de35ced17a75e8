"""PathEnsemble: a residual net unrolled into 2^n paths, and what deleting one block does to it.

Example::

    python render.py render PathEnsemble --quality l

Veit et al. 2016, "Residual Networks Behave Like Ensembles of Relatively Shallow Networks": n
residual blocks unroll into 2^n paths, and the number through k branches is C(n, k), so most paths
are of middle length (Fig. 6a). Deleting one block at test time removes half of the paths but
leaves 2^(n-1) intact, so a residual net barely notices, while a plain net, one single path, breaks
(Fig. 3). The path-length share and the lesion test errors come from the ``paths`` experiment. The
lesion bars are the first seed's nets, a dot per other seed (``--set seeds=...``, default three) sits on
each bar, and the verdict says on how many seeds it holds (the path-length share is C(n, k) / 2^n on every seed).
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, FadeIn, GrowFromEdge, MathTex, VGroup, Write

from simulation.experiments import PLAIN, RESIDUAL

from scenes.kit.base import LectureScene
from scenes.kit.helpers import compare, finite_max, is_missing, strict_mean
from scenes.kit.layout import EDGE_BUFF, inside_margin, line_width
from scenes.kit.seeds import SeedSpread, bar_seed_dots, with_seed_count
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, make_wrapped_text
from scenes.kit.widgets import GroupedBars, make_dashed_polyline, make_legend

__all__ = ["PathEnsemble", "mean_path_length"]


def mean_path_length(fraction: np.ndarray) -> float:
    """Mean number of residual branches on a path, sum_k k * fraction[k] (n / 2 for C(n, k) / 2^n)."""
    fraction = np.asarray(fraction, dtype=np.float64)
    return float(np.arange(len(fraction)) @ fraction)


def signed(text: str) -> str:
    """A formatted number with an explicit sign: "+62.3", "-2.99"."""
    return "+" + text if text[:1].isdigit() and text != "0" else text  # "-2.99", "0", "missing" as they are


def _percent_axis(value: float) -> str:
    return f"{value * 100:g}%"


class PathEnsemble(SeedSpread, LectureScene):
    """Residual nets as ensembles of paths: path-length shares and a one-block lesion test (Veit 2016)."""

    experiment = "paths"

    def construct(self) -> None:
        plain, residual = self.traces[PLAIN], self.traces[RESIDUAL]
        depth = int(residual.run_config.depth)
        fraction = np.asarray(residual["path_length_fraction"], dtype=np.float64)
        for k, share in enumerate(fraction):
            self.number(f"path_length.{k}.fraction", share)
        lesion = {name: np.asarray(t["lesion_test_error"], dtype=np.float64) for name, t in
                  (("plain", plain), ("residual", residual))}
        intact = {name: float(t["final_test_error"]) for name, t in (("plain", plain), ("residual", residual))}
        for name in lesion:
            for l, error in enumerate(lesion[name]):
                self.number(f"{name}.block.{l}.lesion_test_error", error)
        colors = {"plain": PALETTE["plain"], "residual": PALETTE["residual"]}
        # Every seed's lesion errors and intact error (the first seed's are the bars; the others are dots).
        others = self.other_seeds()
        seed_lesion = {name: self.across_seeds_array(name, lambda t: t["lesion_test_error"]) for name in lesion}
        seed_intact = {name: self.across_seeds(name, lambda t: t["final_test_error"]) for name in lesion}
        for name in lesion:
            for seed in others:
                for l, error in enumerate(seed_lesion[name].get(seed, ())):
                    self.number(f"{name}.seed.{seed}.block.{l}.lesion_test_error", error)

        # 1. Unrolling: every block is taken or skipped.
        title = self.title("title")
        formula = MathTex(r"x_3 = (1 + f_3)(1 + f_2)(1 + f_1)\,x_0", font_size=36, color=PALETTE["text"])
        formula.next_to(title, DOWN, buff=0.25)
        power = MathTex(f"2^{{{depth}}} = " + self.number("paths", 2 ** depth).replace(",", "{,}"),
                        font_size=32, color=PALETTE["text"])
        count = VGroup(self.text("count_blocks", size=SIZE_LABEL, depth=self.number("depth", depth)), power,
                       self.text("count_paths", size=SIZE_LABEL)).arrange(RIGHT, buff=0.15)
        count.next_to(formula, DOWN, buff=0.2)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), Write(formula), run_time=2)
        self.narrate("n_count", 2.5)
        self.play(FadeIn(count, shift=UP * 0.1))
        self.wait(1.5)

        # 2. Path lengths: C(n, k) / 2^n, as recorded beside the run.
        lengths = GroupedBars([fraction], [PALETTE["branch"]], width=4.8, height=1.9,
                              labels=[str(k) for k in range(depth + 1)], y_format=_percent_axis)
        lengths.move_to([-3.55, -0.3, 0])
        lengths_title = self.text("lengths_title", size=SIZE_LABEL).next_to(lengths.chart.axes, UP, buff=0.25)
        k_label = self.text("axis_k", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(lengths, DOWN, buff=0.08)
        mean = self.text("mean_length", size=SIZE_SMALL, color=PALETTE["branch"],
                         mean=self.number("mean_path_length", mean_path_length(fraction)), depth=depth)
        inside_margin(mean.next_to(k_label, DOWN, buff=0.12))
        self.narrate("n_lengths", 4)
        self.play(Create(lengths.chart), FadeIn(lengths_title), FadeIn(k_label), run_time=1.2)
        self.play(*[GrowFromEdge(bar, DOWN) for bar in lengths.bars[0]], run_time=1.5)
        self.play(FadeIn(mean))
        self.wait(1.5)

        # 3. The lesion test: delete block l of the trained nets, measure the test error.
        top = finite_max(np.concatenate([*lesion.values(), list(intact.values()),
                                         *(v for by in seed_lesion.values() for v in by.values())]))
        chart = GroupedBars([lesion["plain"], lesion["residual"]], [colors["plain"], colors["residual"]],
                            width=4.8, height=1.9, y_max=top, y_format=_percent_axis)
        chart.move_to([3.6, -0.3, 0])
        chart_title = self.text("lesion_title", size=SIZE_LABEL).next_to(chart.chart.axes, UP, buff=0.25)
        block_label = self.text("axis_block", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.08)
        levels = VGroup(*[make_dashed_polyline([chart.level_line(intact[name], colors[name]).get_start(),
                                                chart.level_line(intact[name], colors[name]).get_end()],
                                               colors[name], stroke_width=2) for name in ("plain", "residual")
                        if not is_missing(intact[name])])  # a missing level is said in the legend
        legend = make_legend([(self.t(f"legend_{name}", error=self.percent(f"{name}.intact_test_error",
                                                                             intact[name])), colors[name])
                              for name in ("plain", "residual")], size=SIZE_SMALL)
        legend.next_to(block_label, DOWN, buff=0.12)
        self.narrate("n_lesion", 4)
        self.play(Create(chart.chart), FadeIn(chart_title), FadeIn(block_label), run_time=1.2)
        self.play(*[GrowFromEdge(bar, DOWN) for bar in [*chart.bars[0], *chart.bars[1]]], Create(levels),
                  FadeIn(legend), run_time=2)
        if others:
            dots = [bar_seed_dots(chart, s, {seed: seed_lesion[name][seed] for seed in others if seed in seed_lesion[name]})
                    for s, name in enumerate(("plain", "residual"))]
            note = self.text("seed_dots", size=SIZE_SMALL, color=PALETTE["muted"], m=len(others))
            note.next_to(chart_title, UP, buff=0.1).align_to(chart.chart.axes, RIGHT)
            self.play(*[FadeIn(d) for d in dots], FadeIn(note), run_time=0.6)
        self.wait(1.5)

        # 4. The verdict, computed from the runs.
        increase = {name: strict_mean(lesion[name]) - intact[name] for name in lesion}  # NaN if any is missing
        agrees = compare(increase["plain"], increase["residual"])
        seed_increase = {name: {seed: strict_mean(v) - seed_intact[name].get(seed, float("nan"))
                                for seed, v in seed_lesion[name].items()} for name in lesion}
        for name, by_seed in seed_increase.items():
            for seed, value in by_seed.items():
                self.number(f"{name}.seed.{seed}.mean_lesion_increase_pct", 100 * value)
        k, n = self.seed_count("residual.more_robust", [compare(seed_increase["plain"][s], seed_increase["residual"][s])
                                                        for s in seed_increase["plain"] if s in seed_increase["residual"]])
        verdict = VGroup(
            self.wrapped("robust", size=SIZE_SMALL,
                      residual=signed(self.number("residual.mean_lesion_increase_pct", 100 * increase["residual"])),
                      plain=signed(self.number("plain.mean_lesion_increase_pct", 100 * increase["plain"]))),
            make_wrapped_text(with_seed_count(self, self.t({True: "robust_agrees", False: "robust_differs",
                                                            None: "no_verdict"}[agrees]), k, n), line_width(),
                              size=SIZE_SMALL),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.12)
        verdict.to_edge(LEFT, buff=EDGE_BUFF).to_edge(DOWN, buff=0.6)
        self.narrate({True: "n_verdict", False: "n_verdict_differs", None: "no_verdict"}[agrees], 4)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite("Veit et al. 2016, Fig. 3, Fig. 6a")
        self.wait(4)
