"""ShortcutScale: why the shortcut must be exactly the identity (He et al. 2016, "Identity Mappings", §3).

Example::

    python render.py render ShortcutScale                          # lambda 0.5, 0.9, 1, 1.1 and two gates, 3 seeds
    python render.py render ShortcutScale --set scales=0.8,1,1.2 --set gates=shortcut_only --set gate_bias=-6

With h = lambda x + F(x) the backward pass through k blocks multiplies the gradient by
prod (lambda I + dF_i/dx)^T (He et al. 2016, eq. 7-8 with lambda_i = lambda). Its shortcut-only term is
lambda^k: the closed form the paper writes. With a random branch the cross terms vanish in expectation,
and E||g_l||^2 = (lambda^2 + s^2) E||g_(l+1)||^2, s^2 = E||J_F^T v||^2 / ||v||^2 the branch's gain (for our ReLU
branch Linear -> ReLU -> Linear under PyTorch's default init times ``init_gain`` g: s^2 = (g^2 / 3)^2 / 2,
:func:`branch_gain_sq`). So the measured ratio follows sqrt(lambda^2 + s^2)^k: lambda^k sets the trend, the
branch lifts it. Left panel: ||dL/dh|| k blocks below the last block over the last block's, at step 0,
measured (solid), lambda^k (dashed) and sqrt(lambda^2 + s^2)^k (faint). Right panel: final training error of
every run (mean of the last tenth of the steps), a dot per other seed. The verdicts are
:func:`seed_verdicts`, counted over the seeds by :func:`count_seeds`: plain functions, testable without Manim.
"""

from __future__ import annotations

import math

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, FadeIn, MathTex, VGroup, Write

from simulation.config import RunConfig

from scenes.kit.base import LectureScene
from scenes.degradation import MARGIN
from scenes.kit.helpers import compare, is_missing, tail_mean
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.seeds import SeedSpread, bar_seed_dots
from scenes.kit.style import PALETTE, SIZE_SMALL, make_text
from scenes.kit.widgets import GroupedBars, LogAxes, make_dashed_polyline, safe_log10, spread_labels

__all__ = ["ShortcutScale", "gradient_ratios", "branch_gain_sq", "expected_ratio", "run_summary", "seed_verdicts",
           "count_seeds", "FOLLOW_FACTOR"]

FOLLOW_FACTOR = 3.0  # the measured end ratio "follows" the expectation when within this factor of it
# Theme roles of the runs, in order: lambda = 1 is drawn in the identity path's colour when it is the third of four.
_SCALE_ROLES = ("plain", "branch", "identity", "warn")
_GATE_ROLES = ("residual", "grad")


def gradient_ratios(trace) -> np.ndarray:
    """r_k = ||dL/dh_(L-1-k)|| / ||dL/dh_(L-1)|| at step 0 for k = 0..L-1 (blocks below the last one):
    float64 [L]; NaN where a norm is missing."""
    g = np.asarray(trace["out_grad_norm"][0], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return g[::-1] / g[-1]


def branch_gain_sq(config: RunConfig) -> float:
    """s^2 = E||J_F^T v||^2 / ||v||^2 of one branch Linear(n, n) -> ReLU -> Linear(n, n) at init: each Linear
    has Var w = g^2 / (3 n) (PyTorch's default Kaiming-uniform times ``init_gain`` g), so it passes g^2 / 3 of
    the squared norm, and ReLU's derivative keeps half of the units: s^2 = (g^2 / 3)^2 / 2 (1/18 at g = 1).
    NaN where this closed form does not apply: another activation, BatchNorm, widths that change, a gate."""
    applies = (config.activation == "relu" and config.norm == "none" and config.stages == 1
               and config.gate == "none" and config.model == "mlp")
    if not applies:
        return float("nan")
    gain_sq = float(config.init_gain) ** 2 / 3
    return gain_sq * gain_sq / 2


def expected_ratio(scale: float, s2: float, k: np.ndarray | float) -> np.ndarray:
    """sqrt(lambda^2 + s^2)^k: the root-mean-square gradient ratio across k blocks of h = lambda x + F(x)."""
    return np.sqrt(scale * scale + s2) ** np.asarray(k, dtype=np.float64)


def run_summary(trace) -> dict[str, float]:
    """One run's figures: ``scale`` (lambda; NaN for a gated run), ``ratio`` (r_(L-1), the whole stack),
    ``shortcut_only`` (lambda^(L-1)), ``expected`` (sqrt(lambda^2 + s^2)^(L-1); NaN without a closed form),
    ``error`` (final training error, tail mean of ``error_curve``; NaN when diverged or missing) and
    ``diverged`` (1.0 / 0.0)."""
    cfg = trace.run_config
    ratios = gradient_ratios(trace)
    k = len(ratios) - 1
    gated = cfg.gate != "none"
    scale = float("nan") if gated else float(cfg.shortcut_scale)
    diverged = bool(trace.meta.diverged)
    curve = np.asarray(trace["error_curve"], dtype=np.float64)
    error = float("nan") if diverged or np.isnan(curve).all() else tail_mean(curve)
    return {"scale": scale, "ratio": float(ratios[-1]), "shortcut_only": scale ** k if not gated else float("nan"),
            "expected": float(expected_ratio(scale, branch_gain_sq(cfg), k)) if not gated else float("nan"),
            "error": error, "diverged": float(diverged)}


def _worse(run: dict, than: dict, margin: float) -> bool | None:
    """``run`` trains worse than ``than``: it diverged and ``than`` did not, or its error is higher by
    more than ``margin``; None when an error that decides it is missing."""
    if run["diverged"] or than["diverged"]:
        return bool(run["diverged"]) and not than["diverged"]
    return compare(run["error"], than["error"], margin)


def seed_verdicts(runs: dict[str, dict], margin: float = MARGIN, factor: float = FOLLOW_FACTOR) -> dict[str, bool | None]:
    """The two claims on one seed's :func:`run_summary` s (``{run name: summary}``); None where a value it
    needs is missing (or lambda = 1 is not among the runs).

    ``follows``: with lambda sorted, the whole-stack ratios rise strictly, and each lies within ``factor``
    of sqrt(lambda^2 + s^2)^(L-1). ``identity_best``: the lambda = 1 run trains no worse than any other run
    (a diverged one counts as worse), and the smallest and largest lambda and every gated run train worse
    than it by more than ``margin``."""
    scales = sorted((s for s in runs.values() if not math.isnan(s["scale"])), key=lambda s: s["scale"])
    out: dict[str, bool | None] = {"follows": None, "identity_best": None}
    ratios = [s["ratio"] for s in scales]
    if len(scales) >= 2 and not any(is_missing(r) or is_missing(s["expected"]) for r, s in zip(ratios, scales)):
        rising = all(b > a for a, b in zip(ratios, ratios[1:]))
        close = all(abs(math.log10(max(r, 1e-300)) - math.log10(s["expected"])) <= math.log10(factor)
                    for r, s in zip(ratios, scales))
        out["follows"] = rising and close
    identity = [s for s in scales if s["scale"] == 1.0]
    if identity:
        one = identity[0]
        others = [s for s in runs.values() if s is not one]
        not_better = [None if _worse(one, s, 0.0) is None else not _worse(one, s, 0.0) for s in others]
        away = [s for s in runs.values() if math.isnan(s["scale"])] + \
            [s for s in (scales[0], scales[-1]) if s is not one]
        worse = [_worse(s, one, margin) for s in away]
        flags = not_better + worse
        out["identity_best"] = None if any(f is None for f in flags) or not away else all(flags)
    return out


def count_seeds(seed_runs: dict[int, dict[str, dict]]) -> dict[str, tuple[int, int]]:
    """``{claim: (k, n)}``: on how many of the n seeds with a verdict each claim of :func:`seed_verdicts`
    holds (``seed_runs``: ``{seed: {run name: summary}}``)."""
    verdicts = [seed_verdicts(runs) for runs in seed_runs.values()]
    out = {}
    for claim in ("follows", "identity_best"):
        known = [v[claim] for v in verdicts if v[claim] is not None]
        out[claim] = (sum(known), len(known))
    return out


class ShortcutScale(SeedSpread, LectureScene):
    """Shortcuts scaled by lambda (and gated): the step-0 gradient ratio across the stack, and training error."""

    _source = "He et al. 2016, Identity Mappings, §3, eq. 7-8, Table 1"  # cited on screen

    experiment = "shortcut_scale"
    required_arrays = ("out_grad_norm", "error_curve")

    def run_color(self, name: str, summary: dict, index: int):
        roles = _SCALE_ROLES if not math.isnan(summary["scale"]) else _GATE_ROLES
        return PALETTE[roles[index % len(roles)]]

    def construct(self) -> None:
        seeds = list(self.seed_traces)
        names = sorted(self.traces, key=lambda n: (self.traces[n].run_config.gate != "none",
                                                   float(self.traces[n].run_config.shortcut_scale), n))
        summaries = {seed: {n: run_summary(t) for n, t in runs.items()} for seed, runs in self.seed_traces.items()}
        first = summaries[seeds[0]]
        for seed, runs in summaries.items():
            for name, s in runs.items():
                self.number(f"{name}.seed.{seed}.ratio", s["ratio"])
                if not s["diverged"]:  # a diverged run has no final error: not a missing value
                    self.number(f"{name}.seed.{seed}.final_error", s["error"])
                self.number(f"{name}.seed.{seed}.diverged", s["diverged"])
        cfg = next(iter(self.traces.values())).run_config
        depth, steps = int(cfg.depth), int(cfg.steps)
        s2 = branch_gain_sq(cfg.replace(gate="none"))
        scale_names = [n for n in names if not math.isnan(first[n]["scale"])]
        gate_names = [n for n in names if math.isnan(first[n]["scale"])]
        colors = {n: self.run_color(n, first[n], i) for i, n in enumerate(scale_names)}
        colors.update({n: self.run_color(n, first[n], i) for i, n in enumerate(gate_names)})
        labels = {n: f"λ={first[n]['scale']:g}" for n in scale_names}
        labels.update({n: f"g{i + 1}" for i, n in enumerate(gate_names)})

        # 1. Title, the set-up and the two formulas.
        title = self.title("title")
        subtitle = self.text("subtitle", size=SIZE_SMALL, color=PALETTE["muted"], depth=depth, steps=steps,
                             seeds=len(seeds)).next_to(title, DOWN, buff=0.12)
        formula = MathTex(r"h_{l+1} = \lambda\, h_l + F(h_l)", r"\qquad",
                          r"\frac{\partial L}{\partial h_l} = \frac{\partial L}{\partial h_L}"
                          r"\prod_i \Big(\lambda + \frac{\partial F_i}{\partial h_i}\Big)", font_size=26,
                          color=PALETTE["text"])
        formula.next_to(subtitle, DOWN, buff=0.1)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(subtitle), run_time=1)
        self.play(Write(formula), run_time=1.5)

        # 2. Left: the gradient ratio across the stack, measured against lambda^k and the expectation.
        k = np.arange(depth, dtype=np.float64)
        ratios = {n: gradient_ratios(self.traces[n]) for n in names}
        for n in names:
            self.number(f"{n}.ratio", first[n]["ratio"])
        for n in scale_names:  # a gate has no closed form: nothing to record, not a missing value
            self.number(f"{n}.shortcut_only", first[n]["shortcut_only"])
            self.number(f"{n}.expected", first[n]["expected"])
        lines_of = {n: expected_ratio(first[n]["scale"], s2, k) for n in scale_names}
        shortcut_of = {n: first[n]["scale"] ** k for n in scale_names}
        every = np.concatenate([*ratios.values(), *lines_of.values(), *shortcut_of.values()])
        logs = safe_log10(every[np.isfinite(every) & (every > 0)])
        exp_min = int(np.floor(logs.min())) if logs.size else -1
        exp_max = max(int(np.ceil(logs.max())) if logs.size else 1, 1)
        ratio_axes = LogAxes((0, depth - 1, max(1, (depth - 1) // 4)), (min(exp_min, -1), exp_max), width=5.4,
                             height=2.0).move_to([-3.3, 0.05, 0])
        for tick in range(0, depth, max(1, (depth - 1) // 4)):
            ratio_axes.ticks.add(make_text(f"{tick}", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(
                ratio_axes.axes.c2p(tick, 0), DOWN, buff=0.08))
        ratio_head = self.text("ratio_axis", size=SIZE_SMALL).next_to(ratio_axes.axes, UP, buff=0.12)
        ratio_head.align_to(ratio_axes.axes, LEFT)
        k_label = self.text("k_axis", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(ratio_axes.axes, DOWN, buff=0.32)
        drawn = VGroup()
        for n in scale_names:
            faint = ratio_axes.polyline(k, lines_of[n], colors[n], stroke_width=7)
            faint.set_stroke(opacity=0.3)
            dashed = make_dashed_polyline([ratio_axes.point(x, y) for x, y in zip(k, shortcut_of[n])], colors[n], 2)
            drawn.add(faint, dashed)
        measured = VGroup(*[ratio_axes.polyline(k, ratios[n], colors[n], stroke_width=3, what=f"{n}.out_grad_norm")
                            for n in names])
        tags = VGroup()
        for n in names:
            end = ratios[n][-1]
            where = ratio_axes.point(depth - 1, end) if not is_missing(end) else ratio_axes.axes.c2p(depth - 1, 0)
            tags.add(make_text(labels[n], size=SIZE_SMALL, color=colors[n]).next_to(where, RIGHT, buff=0.08))
        spread_labels(tags)
        self.narrate("n_ratio", 4)
        self.play(Create(ratio_axes), FadeIn(ratio_head), FadeIn(k_label), run_time=1)
        self.play(FadeIn(drawn), run_time=0.8)
        self.play(Create(measured), FadeIn(tags), run_time=2)

        # 3. Right: final training error of every run, a dot per other seed.
        errors = np.array([1.0 if first[n]["diverged"] else first[n]["error"] for n in names])
        bars = GroupedBars([errors], [PALETTE["residual"]], width=5.0, height=2.0, y_max=1.0,
                           labels=[labels[n] for n in names], y_format=lambda v: f"{v * 100:g}%")
        bars.move_to([3.75, 0.0, 0])
        for bar, n in zip(bars.bars[0], names):
            bar.set_fill(colors[n], opacity=0.9)
        others = {seed: np.array([1.0 if summaries[seed][n]["diverged"] else summaries[seed][n]["error"]
                                  for n in names if n in summaries[seed]]) for seed in self.other_seeds()
                  if all(n in summaries[seed] for n in names)}
        dots = bar_seed_dots(bars, 0, others)
        flags = VGroup(*[self.text("diverged", size=SIZE_SMALL, color=PALETTE["warn"]).next_to(bar, UP, buff=0.05)
                         for bar, n in zip(bars.bars[0], names) if first[n]["diverged"]])
        spread_labels(flags, vertical=False)
        error_head = self.text("error_axis", size=SIZE_SMALL).next_to(bars.chart.axes, UP, buff=0.12)
        error_head.align_to(bars.chart.axes, LEFT)
        if flags:
            error_head.shift(UP * 0.2)
        self.narrate("n_error", 3)
        self.play(FadeIn(bars), FadeIn(error_head), FadeIn(dots), FadeIn(flags), run_time=1.5)

        # 4. Legends and the verdicts, counted over the seeds.
        legend = VGroup(self.text("lines", size=SIZE_SMALL, color=PALETTE["muted"], s2=self.number("branch_gain_sq", s2, 3)))
        if gate_names:
            legend.add(self.text("gates", size=SIZE_SMALL, color=PALETTE["muted"],
                                 bias=self.number("gate_bias", float(self.traces[gate_names[0]].run_config.gate_bias))))
        legend.arrange(DOWN, aligned_edge=LEFT, buff=0.06)
        counts = count_seeds(summaries)
        for claim, (held, of) in counts.items():
            self.number(f"{claim}.seeds", held)
            self.number(f"{claim}.of", of)
        verdict = seed_verdicts(first)
        best = next((n for n in scale_names if first[n]["scale"] == 1.0), None)
        best_error = self.percent("identity.final_error", first[best]["error"] if best else None)
        lines = VGroup(
            self.text("follows" if verdict["follows"] else "not_follows" if verdict["follows"] is False else "no_verdict",
                      size=SIZE_SMALL, k=depth - 1, factor=f"{FOLLOW_FACTOR:g}"),
            self.text("seed_of", size=SIZE_SMALL, color=PALETTE["muted"], k=counts["follows"][0], n=counts["follows"][1]),
            self.text("identity_best" if verdict["identity_best"] else "not_identity_best"
                      if verdict["identity_best"] is False else "no_verdict", size=SIZE_SMALL, best=best_error),
            self.text("seed_of", size=SIZE_SMALL, color=PALETTE["muted"], k=counts["identity_best"][0],
                      n=counts["identity_best"][1]),
        )
        lines[0].add(lines[1].next_to(lines[0], RIGHT, buff=0.2))
        lines[2].add(lines[3].next_to(lines[2], RIGHT, buff=0.2))
        block = VGroup(legend, lines[0], lines[2]).arrange(DOWN, aligned_edge=LEFT, buff=0.08)
        block.to_edge(DOWN, buff=0.62).to_edge(LEFT, buff=EDGE_BUFF)
        self.above_citation(block, self._source)
        self.narrate("n_verdict", 4)
        self.play(FadeIn(block, shift=UP * 0.2), run_time=1.2)
        self.narrate("paper", 4)
        self.cite(self._source)
        self.wait(5)
