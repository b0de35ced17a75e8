"""RankCollapse: stacked self-attention without skips makes every token the same, doubly exponentially fast.

Example::

    python render.py render RankCollapse --quality l --set seeds=0,1,2,3,4

Dong, Cordonnier & Loukas 2021 ("Attention is not all you need: pure attention loses rank doubly
exponentially with depth") prove that a self-attention network (SAN) without skip connections or MLPs drives
its token representations X [T, width] to rank 1: the relative residual res(X) = ||X - 1x^T|| / ||X|| (x the
token mean) falls like res^(3^L), doubly exponentially in the depth L, while skip connections keep it up. The
``rank_collapse`` experiment builds four encoder stacks of 6 layers without LayerNorm (attention alone, + MLPs,
+ skips, + both) and measures res in float64 (Frobenius norm, mean over 64 task sequences) at the input and
after every layer, at initialisation and after training on the reverse task (``rank_residual``).

The claims are decided by the plain functions here (:func:`rank_verdicts`, :func:`drop_ratio`), which tests
call without rendering; the scene shows each with "k of N seeds". Where a run disagrees with the paper (MLPs
without skips do not stop the collapse here), the scene says what was measured.
"""

from __future__ import annotations

import math

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, FadeIn, MathTex, VGroup

from simulation.experiments import SAN, SAN_MLP, SAN_MLP_SKIP, SAN_SKIP

from scenes.kit.base import LectureScene
from scenes.kit.helpers import is_missing, log_range
from scenes.kit.seeds import SeedSpread, with_seed_count
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, RoleColors, make_text
from scenes.kit.widgets import LogAxes, make_legend

__all__ = ["RankCollapse", "RUNS", "RUN_COLORS", "FLOOR", "COLLAPSED", "STAYS_UP", "DOUBLY", "rank_residual",
           "drop_ratios", "drop_ratio", "rank_verdicts", "CLAIMS", "both"]

RUNS = (SAN, SAN_MLP, SAN_SKIP, SAN_MLP_SKIP)
RUN_COLORS = RoleColors(san="plain", san_mlp="warn", san_skip="residual", san_mlp_skip="identity")
FLOOR = 1e-12  # float64 round-off sits near 1e-16: a residual below this is not used for a drop ratio
COLLAPSED = 1e-6  # a top-layer residual below this counts as collapsed (rank 1 to float32 precision)
STAYS_UP = 0.05  # a top-layer residual above this counts as kept up
DOUBLY = 1.5  # median ratio of successive drops in log10 res above this: doubly exponential (a plain exponential: 1)
CLAIMS = ("collapse", "doubly", "skip_keeps", "mlp_alone_collapses")


def rank_residual(trace, record: int) -> np.ndarray:
    """res(X) at the encoder's input and after each layer, at initialisation (``record`` 0) or after training
    (``record`` -1): float64 [layers + 1] (NaN where the trace lacks a value)."""
    return np.asarray(trace["rank_residual"][record], dtype=np.float64)


def drop_ratios(res: np.ndarray) -> np.ndarray:
    """Ratios of successive per-layer drops of log10 res: with d_l = log10 res_l - log10 res_(l+1) over the
    layers whose two residuals are above :data:`FLOOR`, the ratios d_(l+1) / d_l of neighbouring drops
    (float64 [k], possibly empty). An exponential fall res_l = c q^l gives ratios of 1; the SAN bound
    res_(l+1) <= C res_l^3 gives ratios near 3 (Dong et al. 2021, the exponent 3^L)."""
    res = np.asarray(res, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(res > FLOOR, np.log10(np.where(res > 0, res, 1.0)), np.nan)
    drops = logs[:-1] - logs[1:]  # NaN where either end is missing or under the floor
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = drops[1:] / drops[:-1]
    return ratios[np.isfinite(ratios) & (drops[:-1] > 0)]


def drop_ratio(res: np.ndarray) -> float:
    """The median of :func:`drop_ratios`; NaN when there is no ratio (too few layers above the floor, or
    missing values)."""
    ratios = drop_ratios(res)
    return float(np.median(ratios)) if ratios.size else math.nan


def _top(res: np.ndarray) -> float:
    return float(np.asarray(res, dtype=np.float64)[-1])


def rank_verdicts(res: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, bool | None]:
    """The four claims on one seed's runs, ``res``: {run: (res at init, res after training)} for the runs of
    :data:`RUNS`. Each is True, False, or None when a value it needs is missing (or a run is absent):

    - ``collapse``: pure attention (san) ends below :data:`COLLAPSED` at init and after training;
    - ``doubly``: its drop ratio (:func:`drop_ratio`) exceeds :data:`DOUBLY` at init and after training;
    - ``skip_keeps``: with skips (san_skip, san_mlp_skip) the top residual stays above :data:`STAYS_UP`;
    - ``mlp_alone_collapses``: MLPs without skips (san_mlp) end below :data:`COLLAPSED` too (the paper says
      MLPs can slow the collapse; this records what the runs did).
    """
    def tops(run: str) -> list[float] | None:
        if run not in res:
            return None
        values = [_top(r) for r in res[run]]
        return None if any(is_missing(v) for v in values) else values

    def check(values: list[float] | None, test) -> bool | None:
        return None if values is None else all(test(v) for v in values)

    san = res.get(SAN)
    ratios = None if san is None else [drop_ratio(r) for r in san]
    ratios = None if ratios is None or any(math.isnan(v) for v in ratios) else ratios
    skips = [tops(SAN_SKIP), tops(SAN_MLP_SKIP)]
    return {"collapse": check(tops(SAN), lambda v: v < COLLAPSED),
            "doubly": check(ratios, lambda v: v > DOUBLY),
            "skip_keeps": None if None in skips else check(skips[0] + skips[1], lambda v: v > STAYS_UP),
            "mlp_alone_collapses": check(tops(SAN_MLP), lambda v: v < COLLAPSED)}


def both(a: bool | None, b: bool | None) -> bool | None:
    """a and b, or None when either is unknown."""
    return None if a is None or b is None else a and b


class RankCollapse(SeedSpread, LectureScene):
    """res(X) after every layer of four attention stacks (log scale), at init and after training (Dong 2021)."""

    experiment = "rank_collapse"
    experiment_defaults = {"seeds": (0, 1, 2)}  # four small encoders per seed (~5 s each): three keep the lecture fast
    _source = "Dong, Cordonnier & Loukas 2021, Fig. 1-2"  # cited on screen

    def construct(self) -> None:
        res = {run: (rank_residual(t, 0), rank_residual(t, -1)) for run, t in self.traces.items() if run in RUNS}
        depth = len(next(iter(res.values()))[0]) - 1
        for run, (init, trained) in res.items():
            for l in range(depth + 1):
                self.number(f"{run}.layer.{l}.res_step0", init[l], 3)
                self.number(f"{run}.layer.{l}.res_final", trained[l], 3)
        seed_res = {seed: {run: (rank_residual(t, 0), rank_residual(t, -1)) for run, t in runs.items() if run in RUNS}
                    for seed, runs in self.seed_traces.items()}
        by_seed = {seed: rank_verdicts(r) for seed, r in seed_res.items()}
        for seed, r in seed_res.items():
            for run, (init, trained) in r.items():
                self.number(f"{run}.seed.{seed}.top_res_step0", init[-1], 3)
                self.number(f"{run}.seed.{seed}.top_res_final", trained[-1], 3)
            if SAN in r:
                self.number(f"san.seed.{seed}.drop_ratio_step0", drop_ratio(r[SAN][0]))
                self.number(f"san.seed.{seed}.drop_ratio_final", drop_ratio(r[SAN][1]))
        counts = {claim: self.seed_count(claim, [v[claim] for v in by_seed.values()]) for claim in CLAIMS}
        counts["pure"] = self.seed_count("pure_attention", [both(v["collapse"], v["doubly"]) for v in by_seed.values()])
        step = self.number("steps", self.traces[SAN]["step"][-1] + 1, 6)

        # 1. Title, the measure and its meaning.
        title = self.title("title")
        formula = MathTex(r"\mathrm{res}(X) = \frac{\| X - \mathbf{1}\bar{x}^{\top} \|_F}{\| X \|_F}", font_size=34,
                          color=PALETTE["text"])
        what = self.text("what", size=SIZE_SMALL, color=PALETTE["muted"])
        VGroup(formula, what).arrange(RIGHT, buff=0.4).next_to(title, DOWN, buff=0.2)
        self.narrate("n_intro", 3.5)
        self.play(FadeIn(title), run_time=1.0)
        self.narrate("n_measure", 4)
        self.play(FadeIn(formula), FadeIn(what), run_time=1.2)

        # 2. res after every layer, log scale: thin at init, thick after training.
        exp_min, _ = log_range(np.concatenate([np.concatenate(pair) for pair in res.values()]), lowest=-17)
        chart = LogAxes((0, depth, 1), (exp_min, 0), width=6.2, height=2.9).move_to([-2.6, -0.2, 0])
        x_labels = VGroup(*[make_text(str(l), size=SIZE_SMALL, color=PALETTE["muted"])
                            .next_to(chart.axes.c2p(l, 0), DOWN, buff=0.1) for l in range(depth + 1)])
        axis_label = self.text("axis_layer", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(x_labels, DOWN, buff=0.1)
        layers = np.arange(depth + 1, dtype=np.float64)
        thin, thick = VGroup(), VGroup()
        for run, (init, trained) in res.items():
            thin.add(chart.polyline(layers, init, RUN_COLORS[run], stroke_width=2, what=f"{run}.rank_residual[step0]"))
            thick.add(chart.polyline(layers, trained, RUN_COLORS[run], stroke_width=5,
                                     what=f"{run}.rank_residual[final]"))
        legend = make_legend([(self.t(run), RUN_COLORS[run]) for run in res], size=SIZE_LABEL)
        notes = VGroup(self.text("thin", size=SIZE_SMALL, color=PALETTE["muted"]),
                       self.text("thick", size=SIZE_SMALL, color=PALETTE["muted"], step=step)
                       ).arrange(DOWN, aligned_edge=LEFT, buff=0.08)
        VGroup(legend, notes).arrange(DOWN, aligned_edge=LEFT, buff=0.25).next_to(chart, RIGHT, buff=0.5)
        self.play(Create(chart), FadeIn(x_labels), FadeIn(axis_label), FadeIn(legend), run_time=1.2)
        self.narrate("n_collapse", 4.5)
        self.play(Create(thin), FadeIn(notes[0]), run_time=2.5)
        self.narrate("n_skip", 3.5)
        self.play(Create(thick), FadeIn(notes[1]), run_time=2.5)

        # 3. The verdicts, computed from the runs (rank_verdicts) and counted over the seeds; detail in the narration.
        san_init, san_final = res[SAN]
        self.narrate("n_verdict", 3)
        shown = {claim: by_seed[next(iter(by_seed))][claim] for claim in CLAIMS}
        lines = [
            with_seed_count(self, self.t(
                "v_collapse_no" if both(shown["collapse"], shown["doubly"]) is False else "v_collapse", start=self.number("san.res_input", san_init[0], 3),
                top=self.number("san.top_res_final", san_final[-1], 3), layers=depth,
                ratio=self.number("san.drop_ratio_final", drop_ratio(san_final))), *counts["pure"]),
            with_seed_count(self, self.t(
                "v_skip", skip=self.number("san_skip.top_res_final", res[SAN_SKIP][1][-1], 3),
                both=self.number("san_mlp_skip.top_res_final", res[SAN_MLP_SKIP][1][-1], 3)), *counts["skip_keeps"]),
            with_seed_count(self, self.t(
                "v_mlp_no" if shown["mlp_alone_collapses"] is False else "v_mlp",
                top=self.number("san_mlp.top_res_final", res[SAN_MLP][1][-1], 3)), *counts["mlp_alone_collapses"]),
        ]
        # at the house's small size, never scaled down (the legibility floor)
        verdict = VGroup(*[make_text(line, size=SIZE_SMALL) for line in lines]).arrange(DOWN, aligned_edge=LEFT,
                                                                                       buff=0.1)
        verdict.to_edge(LEFT, buff=0.5).to_edge(DOWN, buff=0.6)
        self.above_citation(verdict, self._source)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite(self._source)
        self.wait(5)
