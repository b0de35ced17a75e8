"""PostLNvsPreLN: where the LayerNorm sits, what that does to the gradients at initialisation and to warm-up.

Example::

    python render.py render PostLNvsPreLN --quality l

Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture": Fig. 1 (the two placements),
Fig. 3 (at initialisation the Post-LN gradient norm of the FFN weight W^2 grows toward the output layers, the
Pre-LN one does not), Fig. 2 (Post-LN needs a learning-rate warm-up). The scene draws both placements, then
the measured ||dL/dW^2|| per layer at initialisation of the ``layernorm`` experiment and its three training
curves at one high learning rate, and says in words whether each claim held in these runs. Bars and bold
curves are the first seed's runs; a dot per other seed (``--set seeds=...``, default three) sits on each
bar, a thin curve per other seed follows each loss curve, and each verdict says on how many seeds it holds.
"""

from __future__ import annotations

import math

import numpy as np
from manim import (DOWN, LEFT, RIGHT, UP, Arrow, Create, Dot, FadeIn, FadeOut, GrowFromEdge, Line, MathTex,
                   MoveAlongPath, VGroup, VMobject, Write)

from simulation.experiments import POST_LN, POST_LN_WARMUP, PRE_LN

from scenes.kit.base import LectureScene
from scenes.kit.helpers import compare, finite_max, running_mean, steps_run, tail_mean
from scenes.kit.layout import EDGE_BUFF
from scenes.kit.seeds import SeedSpread, bar_seed_dots, with_seed_count
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, RoleColors, make_text
from scenes.kit.widgets import (GroupedBars, LinearAxes, make_add_node, make_box, make_dashed_polyline, make_legend,
                                nice_ticks, thin_stroke)

__all__ = ["PostLNvsPreLN", "init_ffn_grad_norm", "smooth", "stack_ratio", "final_loss", "grad_rises", "needs_warmup",
           "seed_verdicts", "verdict_stack", "layer_labels", "seed_stack_ratios", "trained_curve", "loss_ticks", "RISE"]

RISE = 1.5  # a last/first layer ratio above this counts as "grows toward the output" in the verdict
RUN_COLORS = RoleColors(post_ln="plain", post_ln_warmup="warn", pre_ln="residual")


def init_ffn_grad_norm(trace) -> np.ndarray:
    """||dL/dW^2|| of each layer's FFN at initialisation, mean over the recorded batches: float64 [layers]."""
    return np.asarray(trace["init_ffn_grad_norm"], np.float64).mean(0)


def stack_ratio(trace, values: np.ndarray, stack: str) -> float:
    """values[last layer] / values[first layer] within ``stack`` ("encoder" or "decoder")."""
    index = [i for i, name in enumerate(trace.meta.layers) if name.startswith(stack + ".")]
    return float(values[index[-1]] / values[index[0]])


def final_loss(trace) -> float:
    """Mean training loss of the last 10 % of the steps the run took (a diverged run stops where it stopped)."""
    return tail_mean(trace["loss_curve"], 0.1, stop=steps_run(trace, len(trace["loss_curve"])))


def grad_rises(ratios: dict[str, float]) -> bool | None:
    """Xiong et al. 2020, Fig. 3 on one seed, from ``{"post_ln": r, "pre_ln": r}`` (each :func:`stack_ratio`
    of :func:`init_ffn_grad_norm`): Post-LN's last / first layer ratio is above :data:`RISE` and above
    Pre-LN's. None when a ratio is missing (NaN): no verdict rests on a gap."""
    checks = (compare(ratios[POST_LN], RISE), compare(ratios[POST_LN], ratios[PRE_LN]))
    return None if None in checks else all(checks)


def needs_warmup(final: dict[str, float]) -> bool | None:
    """Xiong et al. 2020, Fig. 2 on one seed, from the :func:`final_loss` of the three runs: Post-LN without
    warm-up ends above Post-LN with it and above Pre-LN without it. None when a loss is missing."""
    checks = (compare(final[POST_LN], final[POST_LN_WARMUP]), compare(final[POST_LN], final[PRE_LN]))
    return None if None in checks else all(checks)


def seed_verdicts(by_run: dict[str, dict[int, float]], verdict) -> list[bool | None]:
    """``verdict({run: value})`` for each seed of the first run that every run of ``by_run``
    (``{run: {seed: value}}``) has, in that run's seed order: the per-seed flags behind "k of N seeds"."""
    first = next(iter(by_run.values()), {})
    return [verdict({run: values[seed] for run, values in by_run.items()})
            for seed in first if all(seed in values for values in by_run.values())]


def smooth(curve: np.ndarray, window: int = 10) -> np.ndarray:
    """Trailing moving average of a per-step curve (display only): :func:`scenes.kit.helpers.running_mean`,
    so a missing value leaves a gap ``window`` steps wide instead of being averaged away."""
    return running_mean(curve, window)


def verdict_stack(arch: str) -> str:
    """The stack whose last / first layer ratio the Fig. 3 verdict reads: "decoder" for the
    ``encoder_decoder`` model (as in Xiong et al.), else "encoder"."""
    return "decoder" if arch == "encoder_decoder" else "encoder"


def layer_labels(layers) -> list[str]:
    """Bar labels of layer names "encoder.i" / "decoder.i" (0-based): "E<i+1>" / "D<i+1>"."""
    return [("E" if n.startswith("encoder") else "D") + str(int(n.split(".")[1]) + 1) for n in layers]


def seed_stack_ratios(seed_traces: dict[int, dict], seed_grads: dict[str, dict[int, np.ndarray]],
                      stack: str) -> dict[str, dict[int, float]]:
    """``{run: {seed: stack_ratio}}`` of the per-seed gradient norms ``seed_grads`` (``{run: {seed: [layers]}}``,
    each :func:`init_ffn_grad_norm`), layers read from ``seed_traces[seed][run]``; a run with no seed is left out."""
    return {name: {seed: stack_ratio(seed_traces[seed][name], values, stack) for seed, values in by_seed.items()}
            for name, by_seed in seed_grads.items() if by_seed}


def trained_curve(trace) -> tuple[int, np.ndarray]:
    """``(steps, curve)``: the steps the run took before any divergence (:func:`scenes.kit.helpers.steps_run`) and
    its :func:`smooth` loss curve over those steps, float64 [steps]."""
    ran = steps_run(trace, len(trace["loss_curve"]))
    return ran, smooth(trace["loss_curve"][:ran])


def loss_ticks(curves, chance: float) -> list[float]:
    """Loss-axis ticks from 0 to above both the highest finite value of ``curves`` (iterable of 1-D arrays)
    and ``chance`` (ln vocab): :func:`scenes.kit.widgets.nice_ticks`, one more step when they stop below the top."""
    top = max(finite_max(np.concatenate(list(curves)), default=chance), chance)
    ticks = nice_ticks(0, top, 4)
    if ticks[-1] < top:
        ticks.append(round(2 * ticks[-1] - ticks[-2], 12))
    return ticks


class PostLNvsPreLN(SeedSpread, LectureScene):
    """Post-LN vs Pre-LN: LayerNorm's place, measured per-layer gradient norms at init, and warm-up (Xiong 2020)."""

    _source = "Xiong et al. 2020, Fig. 1-3"  # the paper cited on screen (and by the explorer, cli/explore.py)
    experiment = "layernorm"

    def construct(self) -> None:
        post, post_warm, pre = (self.traces[name] for name in (POST_LN, POST_LN_WARMUP, PRE_LN))
        self._beat_placements()
        grad_verdict = self._beat_gradients(post, pre, post_warm.run_config)
        runs = {"post_ln": post, "post_ln_warmup": post_warm, "pre_ln": pre}
        self._beat_training(runs, post_warm.run_config)
        self._beat_verdict(runs, grad_verdict)

    def _beat_placements(self) -> None:
        """1. The two placements, side by side, with their one-line formulas and the backward path."""
        title = self.title("title")
        self.narrate("n_intro", 4)
        self.play(FadeIn(title))
        post_diagram = self.get_placement("post_ln").move_to([-3.35, 1.0, 0])
        pre_diagram = self.get_placement("pre_ln").move_to([3.5, 1.0, 0])
        post_tex = MathTex(r"x_{l+1} = \mathrm{LN}\big(x_l + F(x_l)\big)", font_size=34, color=PALETTE["text"]).next_to(post_diagram, DOWN, buff=0.3)
        pre_tex = MathTex(r"x_{l+1} = x_l + F\big(\mathrm{LN}(x_l)\big)", font_size=34, color=PALETTE["text"]).next_to(pre_diagram, DOWN, buff=0.3)
        post_name = self.text("post", size=SIZE_LABEL, color=RUN_COLORS["post_ln"]).next_to(post_diagram, UP, buff=0.2)
        pre_name = self.text("pre", size=SIZE_LABEL, color=RUN_COLORS["pre_ln"]).next_to(pre_diagram, UP, buff=0.2)
        self.play(Create(post_diagram), Create(pre_diagram), FadeIn(post_name), FadeIn(pre_name), run_time=2)
        self.play(Write(post_tex), Write(pre_tex), run_time=1.5)
        post_note = self.text("post_note", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(post_tex, DOWN, buff=0.2)
        pre_note = self.text("pre_note", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(pre_tex, DOWN, buff=0.2)
        post_jac = MathTex(r"\frac{\partial x_{l+1}}{\partial x_l} = J_{\mathrm{LN}}\Big(I + \frac{\partial F}{\partial x_l}\Big)",
                           font_size=32, color=PALETTE["text"]).next_to(post_note, DOWN, buff=0.45)
        pre_jac = MathTex(r"\frac{\partial x_{l+1}}{\partial x_l} = I + \frac{\partial F(\mathrm{LN}(x_l))}{\partial x_l}",
                          font_size=32, color=PALETTE["text"]).next_to(pre_note, DOWN, buff=0.45)
        self.narrate("n_paths", 5)
        self.play(FadeIn(post_note), FadeIn(pre_note), Write(post_jac), Write(pre_jac), run_time=1.5)
        # The backward pass along the main line: through the LN in Post-LN, around it in Pre-LN.
        for _ in range(2):
            dots = [Dot(color=PALETTE["grad"], radius=0.09) for _ in range(2)]
            paths = [Line(d.out_arrow.get_end(), d.identity.get_start()) for d in (post_diagram, pre_diagram)]
            self.play(*[MoveAlongPath(d, p) for d, p in zip(dots, paths)], run_time=1.5)
            self.remove(*dots)
        self.wait(1)
        first = VGroup(post_diagram, pre_diagram, post_tex, pre_tex, post_name, pre_name, post_note, pre_note,
                       post_jac, pre_jac)
        self.play(FadeOut(first))

    def _beat_gradients(self, post, pre, config) -> VMobject:
        """2. Measured ||dL/dW^2|| per layer at initialisation (Xiong Fig. 3); returns the verdict line, kept on
        screen under the next beat."""
        grads = {"post_ln": init_ffn_grad_norm(post), "pre_ln": init_ffn_grad_norm(pre)}
        layers = post.meta.layers
        for name, values in grads.items():
            for layer, value in zip(layers, values):
                self.number(f"{name}.{layer}.init_ffn_grad_norm", value)
        labels = layer_labels(layers)
        chart = GroupedBars([grads["post_ln"], grads["pre_ln"]], (RUN_COLORS["post_ln"], RUN_COLORS["pre_ln"]),
                            width=8.0, height=3.2, labels=labels, y_format=lambda v: f"{v:g}")
        chart.move_to([-1.3, 0.2, 0])
        grad_title = self.text("grad_title", size=SIZE_LABEL).next_to(chart.chart.axes, UP, buff=0.3)
        depth = config.depth
        axis = self.text("grad_axis", size=SIZE_SMALL, color=PALETTE["muted"], n=depth).next_to(chart, DOWN, buff=0.12)
        legend = make_legend([(self.t("legend_post"), RUN_COLORS["post_ln"]), (self.t("legend_pre"), RUN_COLORS["pre_ln"])],
                             size=SIZE_LABEL).next_to(chart, RIGHT, buff=0.5)
        self.narrate("n_grads", 4)
        self.play(Create(chart.chart), FadeIn(grad_title), FadeIn(axis), FadeIn(legend), run_time=1.2)
        self.play(*[GrowFromEdge(bar, DOWN) for bar in [*chart.bars[0], *chart.bars[1]]], run_time=2)
        others = self.other_seeds()
        seed_grads = {name: self.across_seeds_array(name, init_ffn_grad_norm) for name in (POST_LN, PRE_LN)}
        for name in seed_grads:
            for seed in others:
                for layer, value in zip(layers, seed_grads[name].get(seed, ())):
                    self.number(f"{name}.seed.{seed}.{layer}.init_ffn_grad_norm", value)
        if others:
            dots = [bar_seed_dots(chart, s, {seed: seed_grads[name][seed] for seed in others if seed in seed_grads[name]})
                    for s, name in enumerate((POST_LN, PRE_LN))]
            dots_note = self.text("seed_dots", size=SIZE_SMALL, color=PALETTE["muted"], m=len(others))
            dots_note.next_to(legend, DOWN, buff=0.2).align_to(legend, LEFT)
            self.play(*[FadeIn(d) for d in dots], FadeIn(dots_note), run_time=0.6)
        else:
            dots_note = VGroup()
        stack = verdict_stack(config.arch)
        ratio_post = stack_ratio(post, grads["post_ln"], stack)
        ratio_pre = stack_ratio(pre, grads["pre_ln"], stack)
        rises = grad_rises({POST_LN: ratio_post, PRE_LN: ratio_pre})
        key = "no_verdict" if rises is None else ("grad_rise" if rises else "grad_flat")
        seed_ratios = seed_stack_ratios(self.seed_traces, seed_grads, stack)
        for name, by_seed in seed_ratios.items():
            for seed, ratio in by_seed.items():
                self.number(f"{name}.seed.{seed}.last_over_first", ratio)
        seed_rises = seed_verdicts({POST_LN: seed_ratios[POST_LN], PRE_LN: seed_ratios.get(PRE_LN, {})}, grad_rises)
        rise_k, rise_n = self.seed_count("post_ln.grad_rise", seed_rises)
        grad_verdict = make_text(with_seed_count(self, self.t(key, post=self.number("post_ln.last_over_first", ratio_post),
                                                              pre=self.number("pre_ln.last_over_first", ratio_pre)),
                                                 rise_k, rise_n), size=SIZE_SMALL)
        grad_verdict.to_edge(LEFT, buff=EDGE_BUFF).set_y(-2.75)
        first_bar = 0 if stack == "encoder" else depth  # the trend of the Post-LN bars of that stack
        trend = make_dashed_polyline([bar.get_top() + UP * 0.08 for bar in chart.bars[0][first_bar:first_bar + depth]],
                                     RUN_COLORS["post_ln"], stroke_width=3, num_dashes=18)
        self.play(FadeIn(grad_verdict, shift=UP * 0.1), Create(trend))
        self.wait(3)
        self.play(FadeOut(VGroup(chart, grad_title, axis, legend, trend, dots_note, *(dots if others else ()))))
        return grad_verdict

    def _beat_training(self, runs: dict, config) -> None:
        """3. Training curves at one high peak lr: Post-LN without and with warm-up, Pre-LN without."""
        ran, curves = {}, {}
        for name, t in runs.items():
            ran[name], curves[name] = trained_curve(t)
        steps = len(runs["post_ln"]["loss_curve"])
        chance = math.log(config.vocab)
        y_ticks = loss_ticks(curves.values(), chance)
        loss_axes = LinearAxes((0, steps), (0, y_ticks[-1]), width=7.0, height=2.4, y_ticks=y_ticks)
        loss_axes.move_to([-2.2, 0.75, 0])
        lr_values = {name: np.asarray(t["lr_curve"], np.float64) for name, t in runs.items()}
        lr_top = finite_max(np.concatenate(list(lr_values.values())), default=config.lr)
        lr_axes = LinearAxes((0, steps), (0, lr_top), width=7.0, height=0.6, y_ticks=[0, lr_top], grid=False,
                             y_format=lambda v: "0" if v == 0 else f"{v:.0e}".replace("e-0", "e-"))
        lr_axes.next_to(loss_axes.axes, DOWN, buff=0.5)
        lr_axes.shift(RIGHT * (loss_axes.point(0, 0)[0] - lr_axes.point(0, 0)[0]))  # share the step axis
        lr_label = self.text("lr_axis", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(lr_axes.axes, RIGHT, buff=0.15)
        step_label = self.text("loss_axis", size=SIZE_SMALL, color=PALETTE["muted"])
        step_label.next_to(lr_axes, DOWN, buff=0.1)
        loss_title = self.text("loss_title", size=SIZE_LABEL, lr=self.number("peak_lr", config.lr, digits=2))
        loss_title.next_to(loss_axes.axes, UP, buff=0.3).set_x(loss_axes.axes.get_center()[0])
        chance_line = loss_axes.polyline([0, steps], [chance, chance], PALETTE["muted"], stroke_width=2)
        chance_label = self.text("chance", size=SIZE_SMALL, color=PALETTE["muted"], vocab=config.vocab,
                                 value=self.number("chance_loss", chance))
        chance_label.next_to(loss_axes.point(steps, chance), UP + LEFT, buff=0.08)  # above the line, at its end
        legend_runs = make_legend([(self.t(f"run_{name}", warmup=config.warmup_steps), RUN_COLORS[name])
                                   for name in runs], size=SIZE_LABEL)
        legend_runs.next_to(loss_axes.axes, RIGHT, buff=0.4)
        self.narrate("n_train", 3)
        self.play(Create(loss_axes), Create(lr_axes), FadeIn(loss_title), FadeIn(lr_label), FadeIn(step_label),
                  Create(chance_line), FadeIn(chance_label), FadeIn(legend_runs), run_time=1.5)
        xs = np.arange(steps)
        drawn = []
        for name in runs:
            drawn.append(loss_axes.polyline(xs[:ran[name]], curves[name], RUN_COLORS[name], stroke_width=3,
                                            what=f"{name}.loss_curve"))
            drawn.append(lr_axes.polyline(xs, lr_values[name], RUN_COLORS[name], stroke_width=2,
                                          what=f"{name}.lr_curve"))
        self.play(*[Create(m) for m in drawn], run_time=4)
        others = self.other_seeds()
        spread = VGroup()  # the other seeds' loss curves, thin
        for name in runs:
            for seed in others:
                trace = self.seed_traces[seed].get(name)
                if trace is None:
                    continue
                done, curve = trained_curve(trace)
                spread.add(thin_stroke(loss_axes.polyline(xs[:done], curve, RUN_COLORS[name], stroke_width=1.5,
                                                          what=f"{name}.seed.{seed}.loss_curve"), 0.5))
        if others:
            lines_note = self.text("seed_lines", size=SIZE_SMALL, color=PALETTE["muted"], m=len(others))
            lines_note.next_to(legend_runs, DOWN, buff=0.2).align_to(legend_runs, LEFT)
            self.play(FadeIn(spread), FadeIn(lines_note), run_time=0.6)

    def _beat_verdict(self, runs: dict, grad_verdict: VMobject) -> None:
        """4. The verdict, computed from the runs (mean loss of the last 10 % of the steps)."""
        final = {name: final_loss(t) for name, t in runs.items()}
        warms = needs_warmup(final)
        seed_final = {name: self.across_seeds(name, final_loss) for name in runs}
        for name, by_seed in seed_final.items():
            for seed, value in by_seed.items():
                self.number(f"{name}.seed.{seed}.final_loss", value)
        warm_k, warm_n = self.seed_count("warmup_helps", seed_verdicts(seed_final, needs_warmup))
        verdict = VGroup(
            self.text("warmup_helps", size=SIZE_SMALL, post=self.number("post_ln.final_loss", final["post_ln"]),
                      post_warm=self.number("post_ln_warmup.final_loss", final["post_ln_warmup"]),
                      pre=self.number("pre_ln.final_loss", final["pre_ln"])),
            make_text(with_seed_count(self, self.t("no_verdict" if warms is None else
                                                   ("warmup_verdict_yes" if warms else "warmup_verdict_no")),
                                      warm_k, warm_n), size=SIZE_SMALL),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.1)
        verdict.next_to(grad_verdict, DOWN, buff=0.12, aligned_edge=LEFT)
        self.narrate("n_verdict", 4)
        self.play(FadeIn(verdict, shift=UP * 0.1))
        self.cite(self._source)
        self.wait(4)

    def get_placement(self, norm: str) -> VGroup:
        """One residual sublayer drawn left to right, x -> F -> (+) with the LayerNorm where ``norm`` puts it.
        The group's ``identity`` (main line) and ``out_arrow`` give the backward path."""
        y_main, y_branch = 0.0, 0.8
        start, split = np.array([-2.6, y_main, 0]), np.array([-2.0, y_main, 0])
        add = make_add_node(radius=0.22).move_to([1.5, y_main, 0])
        branch_boxes = VGroup(make_box("F", width=0.9, height=0.5, math=True))
        if norm == "pre_ln":
            branch_boxes = VGroup(make_box("LN", width=0.8, height=0.5, color=PALETTE["identity"]),
                                  make_box("F", width=0.9, height=0.5, math=True)).arrange(RIGHT, buff=0.3)
        branch_boxes.move_to([-0.25, y_branch, 0])
        identity = Line(start, add.get_left(), color=PALETTE["identity"], stroke_width=6)
        branch = VMobject(color=PALETTE["branch"], stroke_width=3).set_points_as_corners([
            split, [split[0], y_branch, 0], branch_boxes.get_left()])
        branch_in = VMobject(color=PALETTE["branch"], stroke_width=3).set_points_as_corners([
            branch_boxes.get_right(), [add.get_center()[0], y_branch, 0], add.get_top()])
        parts = VGroup(identity, branch, branch_boxes, branch_in, add)
        if norm == "post_ln":
            ln = make_box("LN", width=0.8, height=0.5, color=PALETTE["plain"]).next_to(add, RIGHT, buff=0.35)
            parts.add(Arrow(add.get_right(), ln.get_left(), buff=0.02, stroke_width=3, color=PALETTE["text"],
                            max_tip_length_to_length_ratio=0.3), ln)
            out_from = ln.get_right()
        else:
            out_from = add.get_right()
        parts.out_arrow = Arrow(out_from, out_from + RIGHT * 0.6, buff=0.02, stroke_width=3, color=PALETTE["text"],
                                max_tip_length_to_length_ratio=0.3)
        parts.identity = identity  # submobjects: both follow the group when it is scaled and moved
        parts.add(parts.out_arrow)
        parts.add(MathTex("x_l", font_size=30, color=PALETTE["text"]).next_to(start, LEFT, buff=0.1))
        return parts
