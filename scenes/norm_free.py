"""NormFree: training 100 residual blocks without BatchNorm or LayerNorm: standard init, ReZero and Fixup.

Example::

    python render.py render NormFree                        # 100 blocks, 3 seeds
    python render.py render NormFree --set depth=200 --set seeds=0,1,2,3,4

Without normalisation a residual net at He et al.'s init adds a branch whose output is as large as its input
to every block: E||h_(l+1)||^2 = (1 + s_f^2) E||h_l||^2 with s_f^2 = g^4 / 18 for our branch Linear -> ReLU ->
Linear under PyTorch's default init times ``init_gain`` g (g = sqrt 6: s_f^2 = 2, so ||h|| grows by sqrt 3
per block, :func:`growth_per_block`), and 100 blocks multiply it by ~1e24 (Zhang et al. 2019, §2). ReZero
writes h = x + alpha F(x) with alpha = 0 (Bachlechner et al. 2020, eq. 3), Fixup zeroes each branch's last
layer and scales the others by L^(-1/2) (Zhang et al. 2019, §3): both start as the identity, ||h_l|| = ||h_0||.
Left panel: ||h_l|| / ||h_0|| at step 0, per block (log axis), with the closed form. Right panel: the training
loss over the steps, and the step each first falls below :data:`LOSS_LEVEL`. The verdicts are plain functions
(:func:`norm_free_verdicts`, :func:`count_norm_free`), testable without Manim.
"""

from __future__ import annotations

import math

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, Dot, FadeIn, MathTex, VGroup, Write

from simulation.config import RunConfig

from scenes.kit.base import LectureScene
from scenes.kit.helpers import is_missing, steps_run
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.seeds import SeedSpread
from scenes.kit.style import PALETTE, SIZE_SMALL, make_text
from scenes.kit.widgets import LinearAxes, LogAxes, make_dashed_polyline, safe_log10, spread_labels

__all__ = ["NormFree", "forward_growth", "growth_per_block", "steps_to_loss", "norm_free_summary",
           "norm_free_verdicts", "count_norm_free", "LOSS_LEVEL", "EXPLODED", "FLAT"]

LOSS_LEVEL = 0.5  # "trained": the training loss first falls below this (chance on digits: ln 10 = 2.30)
EXPLODED = 1e6  # the standard net's ||h_L|| / ||h_0|| at init counts as exploded above this
FLAT = 1e-5  # ReZero's and Fixup's ||h_l|| / ||h_0|| count as the identity within this of 1
ROLES = {"standard": "plain", "rezero": "identity", "fixup": "residual"}  # theme roles of the three runs


def forward_growth(trace) -> np.ndarray:
    """||h_l|| / ||h_0|| at step 0 for l = 0..L (h_0: the first block's input, the stem's output; mean over the
    batch of each example's norm): float64 [L + 1]; NaN where a norm is missing."""
    out = np.asarray(trace["act_norm"][0], dtype=np.float64)
    first = float(trace["input_norm"][0, 0])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.concatenate([[1.0 if not math.isnan(first) else math.nan], out / first])


def growth_per_block(config: RunConfig) -> float:
    """sqrt(1 + g^4 / 18): the factor E||h_(l+1)||^2 / E||h_l||^2 = 1 + s_f^2 of one standard block at init
    (Linear -> ReLU -> Linear, each Linear passing g^2 / 3 of the squared norm, ReLU half of it; the biases add
    a constant that the growth soon makes negligible). NaN where it does not apply (another activation,
    BatchNorm, changing widths, ReZero or Fixup, which start as the identity)."""
    applies = (config.activation == "relu" and config.norm == "none" and config.stages == 1
               and config.residual_init == "none" and config.shortcut_scale == 1.0 and config.gate == "none")
    if not applies:
        return float("nan")
    return math.sqrt(1 + float(config.init_gain) ** 4 / 18)


def steps_to_loss(trace, level: float = LOSS_LEVEL) -> tuple[int, bool]:
    """(the first step whose training loss is below ``level``, or -1 if none was; whether a loss value the
    answer needs is missing). The steps after a divergence were never run: they are not searched."""
    curve = np.asarray(trace["loss_curve"], dtype=np.float64)[:steps_run(trace, len(trace["loss_curve"]))]
    below = np.flatnonzero(curve < level)
    first = int(below[0]) if len(below) else -1
    lacking = bool(np.isnan(curve[: first if first >= 0 else len(curve)]).any())
    return first, lacking


def norm_free_summary(trace) -> dict[str, float]:
    """One run's figures: ``growth`` (||h_L|| / ||h_0|| at init), ``per_block`` (the measured factor per block:
    growth ** (1 / L)), ``closed_form`` (:func:`growth_per_block`), ``step`` (:func:`steps_to_loss`; NaN when
    a loss it needs is missing), ``diverged`` (1.0 / 0.0), ``diverged_step`` (NaN when it did not)."""
    growth = forward_growth(trace)
    depth = len(growth) - 1
    step, lacking = steps_to_loss(trace)
    diverged = bool(trace.meta.diverged)
    return {"growth": float(growth[-1]), "per_block": float(growth[-1]) ** (1 / depth) if growth[-1] > 0 else math.nan,
            "closed_form": growth_per_block(trace.run_config), "step": math.nan if lacking else float(step),
            "diverged": float(diverged),
            "diverged_step": float(trace.meta.diverged_step) if diverged else math.nan}


def norm_free_verdicts(runs: dict[str, dict]) -> dict[str, bool | None]:
    """Two claims on one seed's summaries ``{"standard": ..., "rezero": ..., "fixup": ...}`` (None where a
    value is missing or a run is absent). ``forward``: the standard net's ||h_L|| / ||h_0|| exceeds
    :data:`EXPLODED` while ReZero's and Fixup's stay within :data:`FLAT` of 1. ``trains``: ReZero and Fixup
    both reach :data:`LOSS_LEVEL` within the budget; the standard net does not (or diverges)."""
    out: dict[str, bool | None] = {"forward": None, "trains": None}
    if not {"standard", "rezero", "fixup"} <= set(runs):
        return out
    growths = [runs[n]["growth"] for n in ("standard", "rezero", "fixup")]
    if not any(is_missing(g) for g in growths):
        out["forward"] = bool(growths[0] > EXPLODED and all(abs(g - 1) <= FLAT for g in growths[1:]))
    steps = [runs[n]["step"] for n in ("standard", "rezero", "fixup")]
    if not any(is_missing(s) for s in steps):
        out["trains"] = bool(steps[0] < 0 and steps[1] >= 0 and steps[2] >= 0)
    return out


def count_norm_free(seed_runs: dict[int, dict[str, dict]]) -> dict[str, tuple[int, int]]:
    """``{claim: (k, n)}`` over the seeds with a verdict, for both claims of :func:`norm_free_verdicts` and
    ``rezero_first`` (ReZero reached :data:`LOSS_LEVEL` at an earlier step than Fixup: reported, not claimed)."""
    flags: dict[str, list[bool]] = {"forward": [], "trains": [], "rezero_first": []}
    for runs in seed_runs.values():
        verdicts = norm_free_verdicts(runs)
        for claim in ("forward", "trains"):
            if verdicts[claim] is not None:
                flags[claim].append(verdicts[claim])
        if {"rezero", "fixup"} <= set(runs):
            a, b = runs["rezero"]["step"], runs["fixup"]["step"]
            if not (is_missing(a) or is_missing(b)) and a >= 0 and b >= 0:
                flags["rezero_first"].append(a < b)
    return {claim: (sum(f), len(f)) for claim, f in flags.items()}


class NormFree(SeedSpread, LectureScene):
    """||h_l|| per block at init and the loss curves of a 100-block residual net without normalisation:
    standard init, ReZero, Fixup."""

    experiment = "norm_free"
    required_arrays = ("act_norm", "input_norm", "loss_curve")

    def when_below(self, name: str, summary: dict) -> str:
        """"at step k", "never", "diverged" (a run that stopped before reaching the level) or "missing"."""
        step = summary.get("step")
        if not is_missing(step) and step >= 0:
            return self.t("at_step", step=self.number(f"{name}.step_below_level", step))
        if summary.get("diverged"):
            return self.t("diverged")
        return self.t("never") if step == -1 else self.number(f"{name}.step_below_level", step)

    def construct(self) -> None:
        seeds = list(self.seed_traces)
        names = [n for n in ("standard", "rezero", "fixup") if n in self.traces]
        summaries = {seed: {n: norm_free_summary(t) for n, t in runs.items()} for seed, runs in self.seed_traces.items()}
        first = summaries[seeds[0]]
        for seed, runs in summaries.items():
            for n, s in runs.items():
                self.number(f"{n}.seed.{seed}.growth", s["growth"])
                self.number(f"{n}.seed.{seed}.step_below_level", s["step"])
        cfg = self.traces[names[0]].run_config
        depth, steps = int(cfg.depth), int(cfg.steps)
        colors = {n: PALETTE[ROLES[n]] for n in names}

        # 1. Title, set-up, the three ways to add a block.
        title = self.title("title")
        subtitle = self.text("subtitle", size=SIZE_SMALL, color=PALETTE["muted"], depth=depth, steps=steps,
                             seeds=len(seeds)).next_to(title, DOWN, buff=0.12)
        formulas = VGroup(
            MathTex(r"h_{l+1} = h_l + F(h_l)", font_size=26, color=colors.get("standard", PALETTE["text"])),
            MathTex(r"h_{l+1} = h_l + \alpha_l F(h_l),\ \alpha_l = 0", font_size=26,
                    color=colors.get("rezero", PALETTE["text"])),
            MathTex(r"W^{(2)}_l = 0,\ W^{(1)}_l \cdot L^{-1/2}", font_size=26, color=colors.get("fixup", PALETTE["text"])),
        ).arrange(RIGHT, buff=0.7).next_to(subtitle, DOWN, buff=0.15)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(subtitle), run_time=1)
        self.play(Write(formulas), run_time=1.5)

        # 2. Left: ||h_l|| / ||h_0|| per block at init, measured, and the closed form of the standard net.
        growth = {n: forward_growth(self.traces[n]) for n in names}
        per = growth_per_block(cfg.replace(residual_init="none"))
        blocks = np.arange(depth + 1, dtype=np.float64)
        closed = per ** blocks * (1.0 if not is_missing(per) else math.nan)
        values = np.concatenate([*growth.values(), closed])
        logs = safe_log10(values[np.isfinite(values) & (values > 0)])
        exp_max = max(int(np.ceil(logs.max())) if logs.size else 1, 1)
        exp_min = min(int(np.floor(logs.min())) if logs.size else -1, -1)
        tick = max(1, depth // 4)
        growth_axes = LogAxes((0, depth, tick), (exp_min, exp_max), width=5.2, height=2.0).move_to([-3.4, 0.1, 0])
        for t in range(0, depth + 1, tick):
            growth_axes.ticks.add(make_text(f"{t}", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(
                growth_axes.axes.c2p(t, 0), DOWN, buff=0.08))
        growth_head = self.text("growth_axis", size=SIZE_SMALL).next_to(growth_axes.axes, UP, buff=0.12)
        growth_head.align_to(growth_axes.axes, LEFT)
        block_label = self.text("block_axis", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(
            growth_axes.axes, DOWN, buff=0.32)
        dashed = VGroup()
        if not is_missing(per):
            dashed.add(make_dashed_polyline([growth_axes.point(x, y) for x, y in zip(blocks, closed)],
                                            PALETTE["muted"], 3))
        lines = VGroup(*[growth_axes.polyline(blocks, growth[n], colors[n], stroke_width=4 if n != "fixup" else 3,
                                              what=f"{n}.act_norm") for n in names])
        tags = VGroup()
        for n in names:
            end = growth[n][-1]
            where = growth_axes.point(depth, end) if not is_missing(end) else growth_axes.axes.c2p(depth, 0)
            tags.add(self.text(n, size=SIZE_SMALL, color=colors[n]).next_to(where, RIGHT, buff=0.08))
        spread_labels(tags)
        self.narrate("n_growth", 4)
        self.play(Create(growth_axes), FadeIn(growth_head), FadeIn(block_label), FadeIn(dashed), run_time=1)
        self.play(Create(lines), FadeIn(tags), run_time=2)

        # 3. Right: the loss curves over the steps, the level and the step each first falls below it.
        curves = {n: np.asarray(self.traces[n]["loss_curve"], dtype=np.float64)[:steps_run(self.traces[n], steps)]
                  for n in names}
        top = 2.5
        loss_axes = LinearAxes((0, steps), (0, top), width=5.0, height=2.0).move_to([3.6, 0.1, 0])
        loss_head = self.text("loss_axis", size=SIZE_SMALL).next_to(loss_axes.axes, UP, buff=0.12)
        loss_head.align_to(loss_axes.axes, LEFT)
        step_label = self.text("step_axis", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(
            loss_axes.axes, DOWN, buff=0.32)
        level = make_dashed_polyline([loss_axes.point(0, LOSS_LEVEL), loss_axes.point(steps, LOSS_LEVEL)],
                                     PALETTE["muted"], 2)
        level_label = self.text("level", size=SIZE_SMALL, color=PALETTE["muted"],
                                level=self.number("loss_level", LOSS_LEVEL)).next_to(level, UP, buff=0.05)
        level_label.align_to(level, RIGHT)
        loss_lines, marks = VGroup(), VGroup()
        for n in names:
            xs = np.arange(len(curves[n]), dtype=np.float64)
            if len(xs):
                loss_lines.add(loss_axes.polyline(xs, curves[n], colors[n], stroke_width=3, what=f"{n}.loss_curve"))
            s = first[n]
            if not is_missing(s["step"]) and s["step"] >= 0:
                marks.add(Dot(loss_axes.point(s["step"], LOSS_LEVEL), radius=0.07, color=colors[n]))
        if "standard" in names and first["standard"]["diverged"]:
            step = first["standard"]["diverged_step"]
            marks.add(self.text("diverged_at", size=SIZE_SMALL, color=colors["standard"],
                                step=self.number("standard.diverged_step", step)).next_to(
                loss_axes.point(steps, top), DOWN + LEFT, buff=0.05))
        self.narrate("n_loss", 4)
        self.play(Create(loss_axes), FadeIn(loss_head), FadeIn(step_label), Create(level), FadeIn(level_label),
                  run_time=1)
        self.play(Create(loss_lines), run_time=2.5)
        self.play(FadeIn(marks), run_time=0.6)

        # 4. The verdicts, counted over the seeds.
        counts = count_norm_free(summaries)
        for claim, (held, of) in counts.items():
            self.number(f"{claim}.seeds", held)
            self.number(f"{claim}.of", of)
        std = first.get("standard", {})
        when = {n: self.when_below(n, first.get(n, {})) for n in ("standard", "rezero", "fixup")}
        rows = VGroup(
            VGroup(self.text("forward", size=SIZE_SMALL, std=self.number("standard.growth", std.get("growth"), 2),
                             rz=self.number("rezero.growth", first.get("rezero", {}).get("growth"), 3),
                             fx=self.number("fixup.growth", first.get("fixup", {}).get("growth"), 3)),
                   self.text("seed_of", size=SIZE_SMALL, color=PALETTE["muted"], k=counts["forward"][0],
                             n=counts["forward"][1])).arrange(RIGHT, buff=0.2),
            VGroup(self.text("trains", size=SIZE_SMALL, level=f"{LOSS_LEVEL:g}", std=when["standard"],
                             rz=when["rezero"], fx=when["fixup"]),
                   self.text("seed_of", size=SIZE_SMALL, color=PALETTE["muted"], k=counts["trains"][0],
                             n=counts["trains"][1])).arrange(RIGHT, buff=0.2),
            self.text("first", size=SIZE_SMALL, color=PALETTE["muted"], k=counts["rezero_first"][0],
                      n=counts["rezero_first"][1]),
            self.text("closed", size=SIZE_SMALL, color=PALETTE["muted"], per=self.number("closed_form_per_block", per, 3)),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.08)
        rows.to_edge(DOWN, buff=0.62).to_edge(LEFT, buff=EDGE_BUFF)
        self.narrate("n_verdict", 4)
        self.play(FadeIn(rows, shift=UP * 0.2), run_time=1.2)
        self.narrate("n_per_block", 3, per=self.number("standard.per_block", std.get("per_block"), 3))
        self.narrate("paper", 4)
        self.cite("Zhang et al. 2019 (Fixup), §2-3; Bachlechner et al. 2020 (ReZero), eq. 3")
        self.wait(5)
