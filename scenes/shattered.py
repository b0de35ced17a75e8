"""ShatteredGradients: the gradient of a net's output with respect to a scalar input, plain vs residual.

Example::

    python render.py render ShatteredGradients --quality l

Balduzzi et al. 2017, "The Shattered Gradients Problem": sweep a scalar input t over [-2, 2] and
plot d(output)/dt at initialisation. A shallow net's gradient is smooth (brown noise); with depth, a
plain net's gradient decorrelates into white noise (its autocorrelation drops like 2^-L), while a
residual net's keeps its structure (decays like 1/sqrt(L)). The scene draws the recorded sweeps of
every depth of the ``shattered`` experiment and the autocorrelation of the deepest pair. The sweeps are
the first seed's nets; the autocorrelation chart adds a thin line per other seed (``--set seeds=...``,
default three), and the verdict says on how many seeds the residual gradient is the more correlated one.
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, FadeIn, Line, MathTex, VGroup, VMobject, Write

from scenes.kit.base import LectureScene
from scenes.kit.helpers import compare
from scenes.kit.layout import EDGE_BUFF, inside_margin, line_width
from scenes.kit.seeds import SeedSpread, with_seed_count
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, make_wrapped_text
from scenes.kit.widgets import GapMark, LinearAxes, gapped_polyline, make_legend, thin_stroke

__all__ = ["ShatteredGradients", "scaled_sweep"]

AT_INIT = 0  # row of input_grad / input_grad_autocorr recorded before the first step (row 1: trained)
MAX_LAG = 16  # lags drawn: white noise is uncorrelated after lag 0, brown noise decays over several


def scaled_sweep(gradient: np.ndarray) -> tuple[np.ndarray, float]:
    """((g - mean g) / scale, scale) with scale = max |g - mean g|: the shape of one sweep on [-1, 1].

    Centred like the autocorrelation (a residual net's gradient carries a large constant from the
    identity path, which would flatten its wiggles); a constant or overflowed (inf) sweep comes back
    as zeros with scale 0. Missing points (NaN) stay NaN, the shape of the rest is centred on the
    points present, and the scale, which would depend on the missing points, is NaN."""
    g = np.asarray(gradient, dtype=np.float64)
    missing = np.isnan(g)
    if missing.all():
        return g.copy(), float("nan")
    present = g[~missing]
    if not np.all(np.isfinite(present)):
        return np.where(missing, np.nan, 0.0), 0.0
    centred = g - present.mean()
    scale = float(np.max(np.abs(centred[~missing])))
    shape = centred / scale if scale > 0 else np.where(missing, np.nan, 0.0)
    return shape, (float("nan") if missing.any() else scale)


class ShatteredGradients(SeedSpread, LectureScene):
    """d(output)/d(input) over a swept scalar input at init, and its autocorrelation (Balduzzi 2017)."""

    _source = "Balduzzi et al. 2017, Fig. 1, Fig. 2"  # cited on screen

    experiment = "shattered"

    def construct(self) -> None:
        runs = {arch: sorted((t.run_config.depth, name) for name, t in self.traces.items() if t.run_config.arch == arch)
                for arch in ("plain", "residual")}
        depths = [d for d, _ in runs["plain"]]
        sweeps, r1 = {}, {}
        for arch in runs:
            for depth, name in runs[arch]:
                trace = self.traces[name]
                shape, scale = scaled_sweep(trace["input_grad"][AT_INIT])
                self.number(f"{name}.input_grad_scale", scale)
                sweeps[name] = (np.asarray(trace["input_sweep"], np.float64), shape)
                r1[name] = float(trace["input_grad_autocorr"][AT_INIT][1])
        colors = {"plain": PALETTE["plain"], "residual": PALETTE["residual"]}

        # 1. The question: d(output)/dt for a scalar input t.
        title = self.title("title")
        formula = MathTex(r"g(t) = \frac{\partial\,(z_1 - z_0)}{\partial t}, \quad t \in [-2, 2]",
                          font_size=34, color=PALETTE["text"]).next_to(title, DOWN, buff=0.2)
        self.narrate("n_intro", 3.5)
        self.play(FadeIn(title), Write(formula), run_time=2)

        # 2. One small plot per run: columns are depths, rows plain / residual.
        cell_w, cell_h, gap = 2.2, 0.9, 0.25
        x0 = -5.4 + cell_w / 2  # the row labels at its left inside the margin
        xs = [x0 + i * (cell_w + gap) for i in range(len(depths))]
        rows_y = {"plain": 1.0, "residual": -0.7}
        headings = VGroup(*[self.text("depth", size=SIZE_SMALL, color=PALETTE["muted"], depth=d).move_to([x, 1.8, 0])
                            for x, d in zip(xs, depths)])
        cells = {arch: VGroup() for arch in runs}
        labels = {arch: VGroup() for arch in runs}
        for arch in runs:
            row_label = self.text(arch, size=SIZE_SMALL, color=colors[arch])
            row_label.move_to([xs[0] - cell_w / 2 - 0.2, rows_y[arch], 0], aligned_edge=RIGHT)
            labels[arch].add(row_label)
            for (depth, name), x in zip(runs[arch], xs):
                t, shape = sweeps[name]
                centre = np.array([x, rows_y[arch], 0])
                axis = Line(centre + LEFT * cell_w / 2, centre + RIGHT * cell_w / 2, stroke_width=1,
                            color=PALETTE["muted"])
                span = (t[-1] - t[0]) if np.isfinite(t[-1] - t[0]) and t[-1] != t[0] else 1.0
                points = [None if np.isnan(ti) or np.isnan(yi) else
                          centre + np.array([(ti - t[0]) / span * cell_w - cell_w / 2, yi * cell_h / 2, 0])
                          for ti, yi in zip(t, shape)]
                curve = gapped_polyline(points, colors[arch], stroke_width=2, gap_box=lambda a, b, c=centre, n=len(points):
                                        GapMark(cell_w * (b - a) / n, cell_h, f"{name}.input_grad").move_to(
                                            c + RIGHT * cell_w * ((a + b) / (2 * n) - 0.5)))
                cells[arch].add(VGroup(axis, curve))
                value = self.text("r1", size=SIZE_SMALL, color=PALETTE["muted"],
                                  value=self.number(f"{name}.autocorr_lag1", r1[name]))
                labels[arch].add(value.next_to(axis, DOWN, buff=cell_h / 2 + 0.08))
        note = self.text("scaled", size=SIZE_SMALL, color=PALETTE["muted"])
        note.next_to(labels["residual"], DOWN, buff=0.15).align_to(cells["residual"], LEFT)
        self.narrate("n_plain", 4)
        self.play(FadeIn(headings), FadeIn(labels["plain"][0]), run_time=0.8)
        self.play(*[Create(cell) for cell in cells["plain"]], FadeIn(VGroup(*labels["plain"][1:])), run_time=3)
        self.wait(1)
        deep = {arch: runs[arch][-1] for arch in runs}
        agrees = compare(r1[deep["residual"][1]], r1[deep["plain"][1]])  # None: a value is missing
        self.narrate({True: "n_residual", False: "n_residual_differs", None: "no_verdict"}[agrees], 3.5)
        self.play(FadeIn(labels["residual"][0]), *[Create(cell) for cell in cells["residual"]],
                  FadeIn(VGroup(*labels["residual"][1:])), FadeIn(note), run_time=3)
        self.wait(1)

        # 3. Autocorrelation of the deepest plain and residual sweeps.
        depth = deep["plain"][0]
        lags = min(MAX_LAG, len(self.traces[deep["plain"][1]]["input_grad_autocorr"][AT_INIT]))
        chart = LinearAxes((0, lags - 1), (-0.5, 1.0), width=3.5, height=2.4, y_ticks=[-0.5, 0, 0.5, 1])
        chart.move_to([4.55, 0.25, 0])
        chart_title = inside_margin(self.text("autocorr_title", size=SIZE_SMALL, depth=depth).next_to(chart.axes, UP,
                                                                                                      buff=0.2))
        lag_label = self.text("axis_lag", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.08)
        lines = []
        for arch in runs:
            _, name = deep[arch]
            autocorr = np.asarray(self.traces[name]["input_grad_autocorr"][AT_INIT][:lags], np.float64)
            for k, value in enumerate(autocorr):
                self.number(f"{name}.autocorr.{k}", value)
            lines.append(chart.polyline(np.arange(len(autocorr)), np.clip(autocorr, -0.5, 1.0), colors[arch],
                                        stroke_width=3))
        others = self.other_seeds()
        spread = VGroup()  # the other seeds' autocorrelation, thin
        seed_r1 = {}  # arch -> {seed: r(1) of the deepest run}
        for arch in runs:
            _, name = deep[arch]
            seed_r1[arch] = self.across_seeds(name, lambda t: t["input_grad_autocorr"][AT_INIT][1])
            for seed in others:
                if seed not in self.seed_traces or name not in self.seed_traces[seed]:
                    continue
                autocorr = np.asarray(self.seed_traces[seed][name]["input_grad_autocorr"][AT_INIT][:lags], np.float64)
                for k, value in enumerate(autocorr):
                    self.number(f"{name}.seed.{seed}.autocorr.{k}", value)
                spread.add(thin_stroke(chart.polyline(np.arange(len(autocorr)), np.clip(autocorr, -0.5, 1.0),
                                                      colors[arch], stroke_width=1.5,
                                                      what=f"{name}.seed.{seed}.input_grad_autocorr"), 0.5))
        entries = [(self.t(arch), colors[arch]) for arch in runs]
        legend = make_legend(entries, size=SIZE_SMALL)
        legend.next_to(lag_label, DOWN, buff=0.12)
        self.narrate("n_autocorr", 4)
        self.play(Create(chart), FadeIn(chart_title), FadeIn(lag_label), FadeIn(legend), run_time=1.2)
        self.play(*[Create(line) for line in lines], run_time=2)
        if others:
            note = self.text("seed_lines", size=SIZE_SMALL, color=PALETTE["muted"], m=len(others))
            note.next_to(legend, DOWN, buff=0.1).align_to(chart.axes, RIGHT)
            self.play(FadeIn(spread), FadeIn(note), run_time=0.6)
        self.wait(1)

        # 4. The verdict, computed from the runs.
        plain_r1, residual_r1 = r1[deep["plain"][1]], r1[deep["residual"][1]]
        for arch in runs:
            for seed, value in seed_r1[arch].items():
                self.number(f"deepest.{arch}.seed.{seed}.autocorr_lag1", value)
        k, n = self.seed_count("residual.more_correlated", [compare(seed_r1["residual"][s], seed_r1["plain"][s])
                                                            for s in seed_r1["residual"] if s in seed_r1["plain"]])
        verdict = VGroup(
            self.wrapped("measured", size=SIZE_SMALL, depth=depth,
                      residual=self.number("deepest.residual.autocorr_lag1", residual_r1),
                      plain=self.number("deepest.plain.autocorr_lag1", plain_r1)),
            make_wrapped_text(with_seed_count(self, self.t({True: "agrees", False: "differs", None: "no_verdict"}[agrees]),
                                              k, n), line_width(), size=SIZE_SMALL),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.12)
        verdict.to_edge(LEFT, buff=EDGE_BUFF).to_edge(DOWN, buff=0.6)
        self.above_citation(verdict, self._source)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite(self._source)
        self.wait(4)
