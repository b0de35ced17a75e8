"""ChainRuleProduct: the per-layer factors of the backward pass multiplied layer by layer.

Example::

    manim -ql scenes/chain_rule.py ChainRuleProduct

The running product ||dL/dh_l|| / ||dL/dh_L|| of a real plain sigmoid network at initialisation
shrinks geometrically (sigma' <= 1/4 per layer); the residual network's stays near 1 because each
block contributes (1 + dF/dx) instead of dF/dx. Source: He et al. 2015 §1; D2L §8.6 (ResNet).

``ChainRuleExploding`` is the same picture for the ``exploding`` experiment: plain ReLU nets at the
smallest and the largest init gain (the product vanishes, or every factor exceeds 1 and it explodes),
then where the trace says training became non-finite (step, block, pass). Source: Glorot & Bengio
2010; He et al. 2015, "Delving Deep into Rectifiers", §2.2 (a ReLU layer's gain).
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, LEFT, UP, Create, config, Dot, FadeIn, MathTex, Mobject, ReplacementTransform, VGroup, Write

from simulation.experiments import PLAIN, PLAIN_LARGE_LR, RESIDUAL

from scenes.kit.base import LectureScene
from scenes.kit.helpers import log_range
from scenes.kit.fit import citation_room
from scenes.kit.layout import EDGE_BUFF, MIN_GAP, inside_margin, line_width
from scenes.kit.seeds import SeedSpread, count_true
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, make_wrapped_text
from scenes.kit.widgets import LogAxes, thin_stroke

__all__ = ["ChainRuleProduct", "ChainRuleExploding", "running_product"]


def running_product(out_grad_norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From ``out_grad_norm`` [depth] (||dL/dh_l|| at one step) return (factors, product), both [depth].

    ``product[l] = ||dL/dh_l|| / ||dL/dh_{L-1}||`` (1 at the last block) and
    ``factors[l] = product[l] / product[l+1]`` (factors[-1] = 1): the shrink of each backward step.
    """
    g = np.asarray(out_grad_norm, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        product = g / g[-1]
        factors = np.append(product[:-1] / product[1:], 1.0)
    return factors, product


def fitted_text(content: str, room: float, color) -> Mobject:
    """``content`` at SIZE_LABEL, or at SIZE_SMALL where that is wider than ``room`` (scene units), or wrapped at
    SIZE_SMALL where that is too: never scaled below the legibility floor (scenes/kit/layout.py)."""
    text = make_text(content, size=SIZE_LABEL, color=color)
    if text.width <= room:
        return text
    text = make_text(content, size=SIZE_SMALL, color=color)
    return text if text.width <= room else make_wrapped_text(content, room, size=SIZE_SMALL, color=color)


class ChainRuleProduct(SeedSpread, LectureScene):
    """Backward pass of a plain and a residual sigmoid net at step 0, layer by layer on a log axis."""

    experiment = "chain_rule"

    _runs = (PLAIN, RESIDUAL)  # the two runs compared, in the order they are drawn
    _colors = ("plain", "residual")  # PALETTE roles of the two runs
    _axes_box = (-1.05, 3.3)  # centre y and height of the log axes (scene units)
    _narrations = ("n_plain", "n_residual")  # string keys said while each run's curve is drawn

    def construct(self) -> None:
        names = self.pick_runs()
        depth = len(self.traces[names[0]]["out_grad_norm"][0])
        factors, products = {}, {}
        for name in names:
            factors[name], products[name] = running_product(self.traces[name]["out_grad_norm"][0])
            for l in range(depth):
                self.number(f"{name}.block.{l}.product", products[name][l])
        others = self.other_seed_products(names)  # {name: {seed: product [depth]}}: the spread

        # 1. The formula (He et al. use the same product; D2L writes it per layer).
        title = self.title("title")
        formula = MathTex(
            r"\frac{\partial L}{\partial W^1} = \frac{\partial L}{\partial A^3}\cdot g^{3\prime} W^3"
            r"\cdot g^{2\prime} W^2 \cdot g^{1\prime} \cdot \frac{\partial Z^1}{\partial W^1}",
            font_size=34, color=PALETTE["text"]).next_to(title, DOWN, buff=0.2)
        self.narrate("n_formula", 3)
        self.play(FadeIn(title), Write(formula), run_time=2)

        # 2. Log axes sized to the data (the top grows past 1 when the product explodes).
        exp_min, exp_max = log_range(np.concatenate([*products.values(), *(p for by in others.values()
                                                                          for p in by.values())]),
                                     margin=1, top_at_least=1)
        centre_y, height = self._axes_box
        axes = LogAxes((1, depth, 1), (exp_min, exp_max), width=7.0, height=height)
        axes.move_to([-1.5, centre_y, 0])
        under = self.block_axis(axes, depth)  # the blocks' names under the axis (a user model), or None
        x_label = self.text("axis_x", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(under or axes, DOWN, buff=0.12)
        y_label = make_text(self.t("axis_y"), size=SIZE_SMALL, color=PALETTE["muted"])
        y_label.next_to(axes.axes, UP, buff=0.12).align_to(axes, LEFT)
        self.play(Create(axes.axes), FadeIn(axes.ticks), FadeIn(x_label), FadeIn(y_label),
                  *([FadeIn(under)] if under else []))

        # 3. Layer by layer, from the output back to the input.
        legend_x = axes.get_right()[0] + 0.5
        rows = {}
        for row, (name, role) in enumerate(zip(names, self._colors)):
            color = PALETTE[role]
            label = fitted_text(self.run_label(name), line_width() / 2 - legend_x, color)
            label.move_to([legend_x, 0.9 - 1.5 * row, 0], aligned_edge=LEFT)
            readout = make_text(self.t("factor_start"), size=SIZE_LABEL, color=color)
            readout.next_to(label, DOWN, aligned_edge=LEFT, buff=0.12)
            rows[name] = (label, readout, color, factors[name], products[name])
            self.add(label, readout)
        steps = self.backward_steps(depth)
        for row, name in enumerate(names):
            label, readout, color, factor, product = rows[name]
            self.narrate(self._narrations[row], 0.35 * (len(steps) + 1) + 1)  # as long as the pen moves
            points = [axes.point(l + 1, product[l]) for l in range(depth)]  # None where missing
            blocks = np.arange(1, depth + 1)
            curve = axes.polyline(blocks[-1:], product[-1:], color, what=f"{name}.out_grad_norm")
            self.add(curve)
            dot = Dot(next((p for p in points[::-1] if p is not None), axes.axes.c2p(depth, 0)), color=color,
                      radius=0.07)
            self.add(dot)
            for hi, l in steps:  # the factor from block hi back to block l (hi > l)
                value = self.number(*self.factor_number(name, hi, l, factor, product))
                # long block names: a smaller size, then a second line, never below the legibility floor
                new_readout = fitted_text(self.factor_label(hi, l, value), line_width() / 2 - legend_x, color)
                new_readout.move_to(readout, aligned_edge=LEFT)
                if new_readout.get_top()[1] > label.get_bottom()[1] - 0.04:  # a wrapped readout grows downwards
                    new_readout.shift(DOWN * (new_readout.get_top()[1] - label.get_bottom()[1] + 0.12))
                new_curve = axes.polyline(blocks[l:][::-1], product[l:][::-1], color, what=f"{name}.out_grad_norm")
                moves = [dot.animate.move_to(points[l])] if points[l] is not None else []  # the pen waits at a gap
                self.play(ReplacementTransform(curve, new_curve), *moves, ReplacementTransform(readout, new_readout),
                          run_time=0.35)
                curve, readout = new_curve, new_readout
            spread = VGroup(*[thin_stroke(axes.polyline(blocks, p, color, what=f"{name}.seed.{seed}.out_grad_norm"),
                                          0.45, width=2) for seed, p in others.get(name, {}).items()])  # other seeds
            if len(spread):
                self.play(FadeIn(spread), run_time=0.5)
            self.wait(0.5)

        # 4. One more measured ratio per run (weight gradients, or the forward signal).
        summary = self._place_summary(self.get_summary(names, line_width()), x_label)
        cite_left, _, _, cite_top = citation_room(self._citation(self._source))
        if summary.get_bottom()[1] < cite_top and summary.get_right()[0] > cite_left:  # it would reach the citation:
            # smaller, or wrapped, to its left
            room = cite_left - MIN_GAP - (EDGE_BUFF - config.frame_x_radius)
            summary = self._place_summary(self.get_summary(names, room), x_label)
        self.play(FadeIn(summary))
        seed_lines = self.seed_claim(names)
        if seed_lines is not None:  # under the legend: how many seeds show the same
            seed_lines.next_to(rows[names[-1]][1], DOWN, buff=0.45, aligned_edge=LEFT)
            inside_margin(seed_lines)  # the Chinese lines are the longer: moved left, never shrunk
            self.play(FadeIn(seed_lines), run_time=0.6)
        self.cite(self._source)
        self.finish(names, summary)

    _source = "He et al. 2015, §1; D2L §5.4"  # citation shown in the corner

    @staticmethod
    def _place_summary(summary: Mobject, x_label: Mobject) -> Mobject:
        """``summary`` under the axis label at the left edge, on screen and inside the frame's margin."""
        summary.next_to(x_label, DOWN, buff=0.12).to_edge(LEFT, buff=EDGE_BUFF)
        overflow = -config.frame_y_radius + 0.05 - summary.get_bottom()[1]
        if overflow > 0:  # a user model's block names under the axis took the room: up into the gap, on screen
            summary.shift(UP * overflow)
        return inside_margin(summary)  # and inside the frame's margin (the legibility floor's 3 %)

    # -- what a variant changes ---------------------------------------------------------------------
    def pick_runs(self) -> tuple[str, str]:
        """Names of the two runs to compare (keys of ``self.traces``)."""
        return self._runs

    def run_label(self, name: str) -> str:
        return self.t(name)

    def backward_steps(self, depth: int) -> list[tuple[int, int]]:
        """(from block, to block) of each step of the pen, output end first: one block at a time."""
        return [(l + 1, l) for l in range(depth - 2, -1, -1)]

    def factor_number(self, name: str, hi: int, l: int, factor: np.ndarray, product: np.ndarray) -> tuple[str, float]:
        """(numbers JSON key, value) of the factor from block ``hi`` back to block ``l``."""
        return f"{name}.block.{l}.factor", factor[l]

    def factor_label(self, hi: int, l: int, value: str) -> str:
        """The readout of that factor; blocks counted from 1, as on the axis."""
        return self.t("factor", a=hi + 1, b=l + 1, value=value)

    def block_axis(self, axes, depth: int):
        """Mobjects naming the blocks under the axis (placed), or None: the built-in nets' blocks are numbered."""
        return None

    def other_seed_products(self, names: tuple[str, str]) -> dict[str, dict[int, np.ndarray]]:
        """``{name: {seed: product [depth]}}`` of every seed but the one drawn in full (numbers recorded)."""
        first = next(iter(self.seed_traces))
        out: dict[str, dict[int, np.ndarray]] = {}
        for seed, traces in self.seed_traces.items():
            for name in names:
                if seed == first or name not in traces:
                    continue
                product = running_product(traces[name]["out_grad_norm"][0])[1]
                for l, value in enumerate(product):
                    self.number(f"{name}.seed.{seed}.block.{l}.product", value)
                out.setdefault(name, {})[seed] = product
        return out

    def seed_claim(self, names: tuple[str, str]):
        """"n of N seeds": the plain product at the input below 1/10, the residual one within 10x of 1."""
        plain, residual = names
        at_input = {name: self.across_seeds(name, lambda t: running_product(t["out_grad_norm"][0])[1][0])
                    for name in names}
        pn, n = count_true(v < 0.1 for v in at_input[plain].values())
        rn, _ = count_true(0.1 <= v <= 10 for v in at_input[residual].values())
        self.number("plain.input_product_below_tenth.seeds", pn)
        self.number("residual.input_product_within_decade.seeds", rn)
        self.number("seeds.of", n)
        return VGroup(self.text("seeds_head", size=SIZE_SMALL, color=PALETTE["muted"], n=n),
                      self.text("seeds_plain", size=SIZE_SMALL, color=PALETTE["plain"], k=pn, n=n),
                      self.text("seeds_residual", size=SIZE_SMALL, color=PALETTE["residual"], k=rn, n=n),
                      ).arrange(DOWN, aligned_edge=LEFT, buff=0.08)

    def get_summary(self, names: tuple[str, str], room: float):
        """||dL/dW|| of the first block over the last block's at step 0, for both runs: :func:`fitted_text` in
        ``room`` (scene units)."""
        shown = [self.number(f"{name}.first_over_last_grad_norm",
                             self.traces[name]["grad_norm"][0, 0] / self.traces[name]["grad_norm"][0, -1])
                 for name in names]
        return fitted_text(self.t("weights", plain=shown[0], residual=shown[1]), room, None)

    def finish(self, names: tuple[str, str], summary) -> None:
        self.wait(2)


class ChainRuleExploding(ChainRuleProduct):
    """The exploding counterpart: plain ReLU nets at a small and a large init gain, and where training diverged."""

    experiment = "exploding"
    experiment_defaults = {}  # one seed: the scene's claims are about where training diverged
    _colors = ("grad", "warn")
    _axes_box = (-0.5, 2.5)  # shorter than the base's: two lines about divergence go below
    _narrations = ("n_low", "n_high")
    _source = "Glorot & Bengio 2010; He et al. 2015 (PReLU), §2.2"

    def pick_runs(self) -> tuple[str, str]:
        """The gain runs (every run but the large-lr one) with the smallest and the largest init gain."""
        gains = sorted((t.run_config.init_gain, name) for name, t in self.traces.items() if name != PLAIN_LARGE_LR)
        if len(gains) < 2:
            raise ValueError(f"{type(self).__name__} needs two plain_gain* runs; got {sorted(self.traces)}")
        return gains[0][1], gains[-1][1]

    def run_label(self, name: str) -> str:
        return self.t("gain", gain=self.number(f"{name}.init_gain", self.traces[name].run_config.init_gain))

    def seed_claim(self, names: tuple[str, str]):
        return None

    def get_summary(self, names: tuple[str, str], room: float):
        """The forward signal grows or shrinks with the same gains: ||h_L|| / ||h_1|| at step 0 (in ``room``)."""
        a, b = (self.number(f"{n}.init_gain", self.traces[n].run_config.init_gain) for n in names)
        ra, rb = (self.number(f"{n}.last_over_first_act_norm",
                              self.traces[n]["act_norm"][0, -1] / self.traces[n]["act_norm"][0, 0]) for n in names)
        return fitted_text(self.t("forward", a=a, ra=ra, b=b, rb=rb), room, None)

    def finish(self, names: tuple[str, str], summary) -> None:
        """Where training diverged: the large-gain run and the large-learning-rate run, from the trace metadata."""
        lines = VGroup()
        for name in (names[1], PLAIN_LARGE_LR):
            if name not in self.traces:
                continue
            trace, cfg = self.traces[name], self.traces[name].run_config
            run = self.t("gain_run", gain=self.number(f"{name}.init_gain", cfg.init_gain),
                         lr=self.number(f"{name}.lr", cfg.lr))
            meta = trace.meta
            if not meta.diverged:
                text = self.t("finite", run=run, steps=self.number(f"{name}.steps", trace["step"][-1]))
            elif meta.diverged_layer is None or meta.diverged_layer < 0:
                text = self.t("diverged_head", run=run, step=self.number(f"{name}.diverged_step", meta.diverged_step))
            else:
                where = meta.diverged_pass
                text = self.t("diverged", run=run, step=self.number(f"{name}.diverged_step", meta.diverged_step),
                              block=self.number(f"{name}.diverged_block", meta.diverged_layer + 1),
                              where=self.t(f"pass_{where}") if where in ("forward", "backward") else str(where))
            lines.add(make_text(text, size=SIZE_SMALL, color=PALETTE["warn"]))
        if len(lines):
            lines.arrange(DOWN, aligned_edge=LEFT, buff=0.08).next_to(summary, DOWN, buff=0.15, aligned_edge=LEFT)
            self.above_citation(lines, self._source)  # a long line (zh) reaches over the citation: raised into the gap
            self.narrate("n_diverged", 4)
            self.play(FadeIn(lines), run_time=1)
        self.wait(3)
