"""HyperConnections: more than one lane. n residual streams mixed by learned matrices, free or doubly stochastic.

Example::

    python render.py render HyperConnections --quality l --set seeds=0,1,2,3,4

Hyper-Connections (Zhu et al. 2025) widen the single residual stream to n streams mixed by a learned matrix
H_res in every block; over L blocks the streams are multiplied by H_res^L ... H_res^1. DeepSeek's mHC (2025)
found that product's gain growing to thousands in HC and projects each H_res onto the doubly stochastic
matrices (Sinkhorn-Knopp), whose products keep every row and column sum at 1: the identity mapping's stability
comes back. The ``hyper_connections`` experiment trains both at a small size (:mod:`simulation.kinds.hyper`); the
scene draws the gain of the product after each block, at step 0 and after training, and says on how many seeds
the free product grew while the projected one stayed at 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, FadeIn, MathTex, VGroup, Write

from scenes.kit.base import LectureScene
from scenes.kit.helpers import is_missing
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.seeds import SeedSpread
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import LogAxes, make_dashed_polyline, make_legend

__all__ = ["HyperConnections", "hyper_claim", "final_gain", "GROWN", "HELD"]

GROWN = 1.5  # the free product "grew" when its gain (largest absolute row sum) ends above this
HELD = 0.01  # the projected product "stayed at 1" when its gain ends within this of 1


def final_gain(trace: Mapping[str, Any], key: str = "composite_row_gain") -> float:
    """The gain of the product of all blocks' H_res at the last record (NaN when missing)."""
    values = np.asarray(trace[key], np.float64)
    return float(values[-1, -1]) if values.size else float("nan")


def hyper_claim(hc: Mapping[str, Any], mhc: Mapping[str, Any]) -> bool | None:
    """DeepSeek 2025's motivation on one seed: after training the product of HC's free mixing matrices has a gain
    above :data:`GROWN`, the product of mHC's doubly stochastic ones a gain within :data:`HELD` of 1. Traces hold
    ``composite_row_gain`` [T, L]; None when a value is missing."""
    a, b = final_gain(hc), final_gain(mhc)
    if is_missing(a) or is_missing(b):
        return None
    return bool(a > GROWN and abs(b - 1.0) < HELD)


class HyperConnections(SeedSpread, LectureScene):
    """The gain of the product of the residual-mixing matrices across blocks: free (HC) vs doubly stochastic (mHC)."""

    _source = "Zhu et al. 2025; DeepSeek 2025 (mHC)"  # cited on screen

    experiment = "hyper_connections"
    chapter = "beyond"  # its runs are small, but the chapter gathers the findings after 2016 (README)
    experiment_defaults = {"seeds": (0, 1, 2)}
    required_arrays = {"step": ("records",), "composite_row_gain": ("records", "depth"),
                       "composite_col_gain": ("records", "depth"), "final_test_error": ()}

    def construct(self) -> None:
        hc, mhc = self.traces["hc"], self.traces["mhc"]
        config = hc.run_config
        depth = np.asarray(hc["composite_row_gain"]).shape[1]
        blocks = np.arange(1, depth + 1, dtype=np.float64)
        for name, t in (("hc", hc), ("mhc", mhc)):
            gains = np.asarray(t["composite_row_gain"], np.float64)
            for l in range(depth):
                self.number(f"{name}.block.{l}.row_gain", gains[-1, l], 4)
            self.number(f"{name}.row_gain", final_gain(t), 4)
            self.number(f"{name}.col_gain", final_gain(t, "composite_col_gain"), 4)
            self.number(f"{name}.row_gain_step0", gains[0, -1], 4)
            self.percent(f"{name}.test_error", float(t["final_test_error"]))
            for seed, value in self.across_seeds(name, final_gain).items():
                self.number(f"{name}.seed.{seed}.row_gain", value, 4)

        # 1. Title, the setup and the update rule.
        title = self.title("title")
        setup = self.text("setup", size=SIZE_SMALL, color=PALETTE["muted"],
                          n=self.number("streams", config.streams, 6), depth=self.number("depth", depth, 6),
                          width=self.number("width", config.width, 6), steps=self.number("steps", config.steps, 6))
        setup.next_to(title, DOWN, buff=0.12)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(setup), run_time=1.2)
        self.narrate("n_static", 3)
        formula = MathTex(r"H \leftarrow H_{\mathrm{res}}\,H + H_{\mathrm{post}}^{\top}\,F(H_{\mathrm{pre}}\,H)",
                          font_size=34, color=PALETTE["text"]).next_to(setup, DOWN, buff=0.25)
        self.narrate("n_formula", 4)
        self.play(Write(formula), run_time=1.5)

        # 2. The gain of the product after each block: step 0 (thin) and after training (thick), on a log axis.
        values = np.concatenate([np.asarray(t[k], np.float64).ravel() for t in (hc, mhc)
                                 for k in ("composite_row_gain",)])
        finite = values[np.isfinite(values) & (values > 0)]
        top = int(np.ceil(np.log10(finite.max()))) if finite.size else 1
        chart = LogAxes((1, max(depth, 2), 1), (0, max(top, 1)), width=7.4, height=2.3).move_to([-2.3, -0.2, 0])
        for tick in (1, depth):
            chart.ticks.add(make_text(f"{tick}", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(
                chart.point(tick, 1.0), DOWN, buff=0.1))
        axis = self.text("axis", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.05)
        one = make_dashed_polyline([chart.point(1, 1.0), chart.point(depth, 1.0)], PALETTE["muted"], 2)
        colors = {"hc": PALETTE["warn"], "mhc": PALETTE["identity"]}
        lines, thin = VGroup(), VGroup()
        for name, t in (("hc", hc), ("mhc", mhc)):
            gains = np.asarray(t["composite_row_gain"], np.float64)
            thin.add(chart.polyline(blocks, gains[0], colors[name], stroke_width=2, what=f"{name}.composite_row_gain[0]"))
            lines.add(chart.polyline(blocks, gains[-1], colors[name], stroke_width=5, what=f"{name}.composite_row_gain"))
        legend = make_legend([(self.t("hc"), colors["hc"]), (self.t("mhc"), colors["mhc"]),
                              (self.t("init"), PALETTE["muted"])], size=SIZE_SMALL)
        legend.next_to(chart.axes, RIGHT, buff=0.3).align_to(chart.axes, UP)
        self.narrate("n_curves", 5)
        self.play(Create(chart), FadeIn(axis), Create(one), FadeIn(legend), Create(thin), run_time=1.5)
        self.play(Create(lines), run_time=2.5)

        # 3. The verdict on every seed.
        verdicts = {seed: hyper_claim(runs["hc"], runs["mhc"]) for seed, runs in self.seed_traces.items()
                    if "hc" in runs and "mhc" in runs}
        k, n = self.seed_count("claim", verdicts.values())
        seeds = self.t("seed_of", k=self.number("claim.seeds", k, 6), n=self.number("claim.of", n, 6))
        first = verdicts.get(next(iter(self.seed_traces)))
        fmt = {"steps": self.number("steps", config.steps, 6), "hc": self.number("hc.row_gain", final_gain(hc), 3),
               "hc_col": self.number("hc.col_gain", final_gain(hc, "composite_col_gain"), 3),
               "mhc": self.number("mhc.row_gain", final_gain(mhc), 4), "seeds": seeds}
        verdict = VGroup(
            self.wrapped("no_verdict" if first is None else "holds" if first else "fails", size=SIZE_SMALL,
                      color=PALETTE["identity"], **fmt),
            self.wrapped("scale", size=SIZE_SMALL, hc=fmt["hc"]),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.08)
        verdict.to_edge(LEFT, buff=EDGE_BUFF).to_edge(DOWN, buff=0.62)
        self.above_citation(verdict, self._source)
        self.narrate("n_verdict", 3)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.narrate("n_errors", 3, hc_err=self.percent("hc.test_error", float(hc["final_test_error"])),
                     mhc_err=self.percent("mhc.test_error", float(mhc["final_test_error"])))
        self.cite(self._source)
        self.wait(5)
