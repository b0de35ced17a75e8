"""LogitLens: read a small GPT's residual stream after every layer as if it were the last.

Example::

    python render.py render LogitLens --quality l --set seeds=0,1,2,3,4

The logit lens (nostalgebraist 2020; Belrose et al. 2023, who name it and improve on it with the tuned lens) decodes the residual stream h_l
after layer l through the model's own final LayerNorm and unembedding, logits_l = W_U LN_f(h_l), and compares
it with the model's real output. The ``logit_lens`` experiment trains a causal Pre-LN Transformer (4 layers,
width 32) on the reverse task: it reads the source, BOS and the target so far, and predicts the next target
token. ``lens_kl`` (KL(p_L || p_l), nats) and ``lens_top1`` (the fraction of positions whose top token at layer
l is the final one) are measured on 64 fixed task sequences at initialisation and after training. The scene
draws both per layer and says from which layer on the answer rides the stream to the top: the study note's
conveyor belt, with the answer as the goods. The verdicts come from the plain functions here
(:func:`lens_verdicts`, :func:`answer_layer`), which tests call without rendering.
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, Dot, FadeIn, MathTex, VGroup

from simulation.experiments import GPT
from simulation.runkeys import RunKey

from scenes.kit.base import LectureScene
from scenes.kit.helpers import finite_max, is_missing
from scenes.kit.seeds import SeedSpread, with_seed_count
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import LinearAxes, nice_ticks

__all__ = ["LogitLens", "AGREE", "KL_DROP", "lens_row", "answer_layer", "lens_verdicts", "CLAIMS"]

AGREE = 0.9  # top-1 agreement with the final prediction from which a layer counts as "has the answer"
KL_DROP = 0.1  # the KL at the last layer below the top must fall below this fraction of the KL at the input
CLAIMS = ("kl_falls", "answer_early")
LENS_KEYS = ("lens_kl", "lens_top1")  # the arrays drawn; one a trace lacks is filled with NaN and drawn as a gap


def lens_row(trace, key: str, record: int) -> np.ndarray:
    """``lens_kl`` / ``lens_top1`` / ``lens_accuracy`` at initialisation (``record`` 0) or after training (-1):
    float64 [layers + 1], layer 0 the embedded input, the last the model's output."""
    return np.asarray(trace[key][record], dtype=np.float64)


def answer_layer(top1: np.ndarray) -> int | None:
    """The first layer l >= 1 whose top-1 agreement with the final prediction reaches :data:`AGREE`; None when
    none does, or when a value on the way is missing."""
    for layer, value in enumerate(np.asarray(top1, dtype=np.float64)):
        if is_missing(value):
            return None
        if layer >= 1 and value >= AGREE:
            return layer
    return None


def lens_verdicts(kl: np.ndarray, top1: np.ndarray) -> dict[str, bool | None]:
    """The claims on one trained run (arrays [L + 1] from :func:`lens_row`), each True, False or None (a value
    it needs is missing):

    - ``kl_falls``: KL(p_L || p_l) at layer L - 1 is below :data:`KL_DROP` times its value at the input;
    - ``answer_early``: some layer below the top (1 <= l < L) already agrees with the final top-1 prediction on
      at least :data:`AGREE` of the positions (the answer is on the stream before the last layer).
    """
    kl, top1 = np.asarray(kl, dtype=np.float64), np.asarray(top1, dtype=np.float64)
    falls = None if is_missing(kl[0]) or is_missing(kl[-2]) else bool(kl[-2] < KL_DROP * kl[0])
    inner = top1[1:-1]
    if np.isnan(inner).any():
        early = True if (inner[np.isfinite(inner)] >= AGREE).any() else None
    else:
        early = bool((inner >= AGREE).any())
    return {"kl_falls": falls, "answer_early": early}


class LogitLens(SeedSpread, LectureScene):
    """KL to the final prediction and top-1 agreement of every layer's residual stream (the logit lens)."""

    _source = "nostalgebraist 2020 (the logit lens); Belrose et al. 2023 (tuned lens)"  # on screen

    experiment = "logit_lens"
    experiment_defaults = {"seeds": (0, 1, 2)}  # one small GPT per seed (~8 s each)

    def setup(self) -> None:
        super().setup()
        # One run per seed: no sibling says a lens array's shape, so a missing one is made here, [2, depth + 1].
        for seed, runs in self.seed_traces.items():
            for run, trace in runs.items():
                for key in LENS_KEYS:
                    if key not in trace.arrays:
                        trace.arrays[key] = np.full((2, int(trace.run_config.depth) + 1), np.nan)
                        missing = self.numbers.setdefault("missing_arrays", {})
                        missing.setdefault(self.run_texts[RunKey(run, seed)], []).append(key)
                        self._trace_has_nan = True

    def construct(self) -> None:
        trace = self.traces[GPT]
        rows = {key: (lens_row(trace, key, 0), lens_row(trace, key, -1)) for key in ("lens_kl", "lens_top1")}
        depth = len(rows["lens_kl"][0]) - 1
        for key, (init, trained) in rows.items():
            for l in range(depth + 1):
                self.number(f"gpt.layer.{l}.{key}_step0", init[l], 3)
                self.number(f"gpt.layer.{l}.{key}_final", trained[l], 3)
        by_seed = {}
        for seed, runs in self.seed_traces.items():
            if GPT not in runs:
                continue
            kl, top1 = lens_row(runs[GPT], "lens_kl", -1), lens_row(runs[GPT], "lens_top1", -1)
            by_seed[seed] = lens_verdicts(kl, top1)
            layer = answer_layer(top1)
            self.number(f"gpt.seed.{seed}.answer_layer", None if layer is None else layer, 6)
            self.number(f"gpt.seed.{seed}.kl_input_final", kl[0], 3)
            self.number(f"gpt.seed.{seed}.kl_last_hidden_final", kl[-2], 3)
        counts = {claim: self.seed_count(claim, [v[claim] for v in by_seed.values()]) for claim in CLAIMS}
        steps = self.number("steps", trace["step"][-1] + 1, 6)
        error = self.percent("gpt.test_error_final", trace["test_error"][-1], 1)

        # 1. Title and the lens.
        title = self.title("title")
        formula = MathTex(r"\mathrm{lens}_l = W_U \, \mathrm{LN}_f(h_l)", font_size=34, color=PALETTE["text"])
        what = self.text("what", size=SIZE_SMALL, color=PALETTE["muted"])
        VGroup(formula, what).arrange(RIGHT, buff=0.35).next_to(title, DOWN, buff=0.2)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), run_time=1.0)
        self.narrate("n_lens", 4)
        self.play(FadeIn(formula), FadeIn(what), run_time=1.2)

        # 2. Two charts over the layers: KL to the final prediction, top-1 agreement. Thin: init; thick: trained.
        layers = np.arange(depth + 1, dtype=np.float64)
        kl_top = finite_max(np.concatenate(rows["lens_kl"]), default=1.0)
        kl_ticks = nice_ticks(0.0, kl_top)
        kl_chart = LinearAxes((0, depth), (0.0, max(kl_ticks[-1], kl_top)), width=5.2, height=2.4,
                              x_ticks=list(range(depth + 1)), x_format=lambda v: f"{v:g}").move_to([-3.4, -0.55, 0])
        top_chart = LinearAxes((0, depth), (0.0, 1.0), width=5.2, height=2.4, x_ticks=list(range(depth + 1)),
                               x_format=lambda v: f"{v:g}").move_to([3.4, -0.55, 0])
        heads = VGroup()
        for chart, key in ((kl_chart, "kl_title"), (top_chart, "top1_title")):
            heads.add(self.text(key, size=SIZE_LABEL).next_to(chart, UP, buff=0.15))
        axis = VGroup(*[self.text("axis_layer", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(c, DOWN, buff=0.08)
                        for c in (kl_chart, top_chart)])
        thin, thick, dots = VGroup(), VGroup(), VGroup()
        for chart, key in ((kl_chart, "lens_kl"), (top_chart, "lens_top1")):
            init, trained = rows[key]
            thin.add(chart.polyline(layers, init, color=PALETTE["muted"], stroke_width=2, what=f"gpt.{key}[step0]"))
            thick.add(chart.polyline(layers, trained, color=PALETTE["residual"], stroke_width=5,
                                     what=f"gpt.{key}[final]"))
            dots.add(*[Dot(chart.point(x, y), radius=0.06, color=PALETTE["residual"])
                       for x, y in zip(layers, trained) if np.isfinite(y)])
        notes = VGroup(self.text("thin", size=SIZE_SMALL, color=PALETTE["muted"]),
                       self.text("thick", size=SIZE_SMALL, color=PALETTE["residual"], steps=steps, error=error)
                       ).arrange(RIGHT, buff=0.6).next_to(axis, DOWN, buff=0.12).set_x(0)
        self.play(Create(kl_chart), Create(top_chart), FadeIn(heads), FadeIn(axis), run_time=1.2)
        self.play(Create(thin), FadeIn(notes[0]), run_time=2)
        self.narrate("n_curves", 4)
        self.play(Create(thick), FadeIn(dots), FadeIn(notes[1]), run_time=2.5)

        # 3. The verdicts, from lens_verdicts on every seed; the first seed's figures. Two short lines at the
        # house's small size, never scaled down (the legibility floor); the values at initialisation are narrated.
        kl_init, kl_final = rows["lens_kl"]
        self.narrate("n_verdict", 3, last=depth - 1, kl0_init=self.number("gpt.kl_input_step0", kl_init[0], 3),
                     kl_last_init=self.number("gpt.kl_last_hidden_step0", kl_init[-2], 3))
        shown = lens_verdicts(kl_final, rows["lens_top1"][1])
        layer = answer_layer(rows["lens_top1"][1])
        if shown["answer_early"] and layer is not None:
            answer = self.t("v_answer", layer=self.number("gpt.answer_layer", layer, 6), layers=depth,
                            agree=self.percent("gpt.answer_layer_top1", rows["lens_top1"][1][layer], 1))
        else:
            answer = self.t("v_no_answer", agree_pct=f"{AGREE:.0%}")
        kl_line = self.t("v_kl_no" if shown["kl_falls"] is False else "v_kl", last=depth - 1,
                         kl0=self.number("gpt.kl_input_final", kl_final[0], 3),
                         kl_last=self.number("gpt.kl_last_hidden_final", kl_final[-2], 3))
        verdict = VGroup(make_text(with_seed_count(self, answer, *counts["answer_early"]), size=SIZE_SMALL),
                         make_text(with_seed_count(self, kl_line, *counts["kl_falls"]), size=SIZE_SMALL)
                         ).arrange(DOWN, aligned_edge=LEFT, buff=0.1)
        verdict.to_edge(LEFT, buff=0.5).to_edge(DOWN, buff=0.6)
        self.above_citation(verdict, self._source)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite(self._source)
        self.wait(5)
