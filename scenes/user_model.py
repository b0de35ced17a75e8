"""Your own network: the lecture's scenes drawn from a user model's trace and its plain twin's.

Example::

    python render.py render ModelGradientFlowOverTraining --model torchvision.models:resnet18
    python render.py render GradientFlowOverTraining --model my_net.py:build     # the same scene

A user model enters as one more run kind: the experiment ``model`` has the runs ``residual`` (the user's
network) and ``plain`` (its twin with every shortcut removed), once per seed of ``seeds``, each an
ordinary trace whose per-block arrays follow the model's residual additions in forward order and whose
``meta.layers`` are the user's module paths (``layer2.0``, ``transformer.h.11.mlp``). Each scene here is a
variant of a lecture scene (a subclass that overrides class attributes and the few hooks the lecture scene
offers): it reads the number of blocks and their names from the trace, never from the built-in experiments'
depths, and labels the blocks with :class:`scenes.kit.block_labels.BlockLabels` (shared prefix as a heading,
groups by stage or layer, thinned and ellipsized labels), so 2 to 100+ blocks lay out without overlapping
text. :data:`MODEL_VARIANTS` maps each lecture scene to its variant (``render.py render SCENE --model``).
Sources as in the lecture scenes: He et al. 2015, §1, Fig. 1, 6, 7; He et al. 2016, eq. 4-5.
"""

from __future__ import annotations

import math

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, FadeIn, VGroup, config

from simulation.config import ConfigError, spec_title
from simulation.experiments import PLAIN, RESIDUAL

from scenes.kit.base import LectureScene
from scenes.kit.block_labels import BlockLabels, block_names, middle_ellipsis, short_name
from scenes.chain_rule import ChainRuleProduct
from scenes.degradation import Degradation, error_curve, smoothing_window
from scenes.does_it_copy import DoesItOnlyCopy
from scenes.gradient_flow import GradientFlowOverTraining
from scenes.kit.helpers import compare, finite_max
from scenes.kit.layout import EDGE_BUFF, MIN_GAP, inside_margin, line_width
from scenes.kit.seeds import count_true
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text, make_wrapped_text
from scenes.kit.widgets import LinearAxes, make_legend
from scenes.plus_one import GradientPlusOne
from scenes.residual_response import ResidualResponse

__all__ = ["UserModelScene", "ModelGradientFlowOverTraining", "ModelChainRuleProduct", "ModelGradientPlusOne",
           "ModelResidualResponse", "ModelDoesItOnlyCopy", "ModelDegradation", "MODEL_SCENES", "MODEL_VARIANTS",
           "model_title", "MODEL_EXPERIMENT"]

MODEL_EXPERIMENT = "model"  # the experiment of a user's model: runs "residual" (the model) and "plain" (its twin)
MAX_PEN_STEPS = 12  # ChainRuleProduct's pen moves at most this many times per run (a block group per move)


def model_title(trace) -> str | None:
    """A short name of the user's model: the factory of its config's ``spec`` (``resnet18`` from
    ``torchvision.models:resnet18``; the file or module where the factory's name says nothing: ``my_resnet`` from
    ``examples/my_resnet.py:build``: :func:`simulation.config.spec_title`), or the ``title`` of a run read from a
    trace file (the watched model's class); None for a built-in run."""
    try:
        config = trace.run_config
    except ConfigError:  # a watched run's own file (kind "watch", no run kind): the model's class it names
        config = None
    watched = trace.meta.watch if isinstance(getattr(trace.meta, "watch", None), dict) else {}
    title = getattr(config, "title", None) or spec_title(getattr(config, "spec", None)) or watched.get("model")
    return middle_ellipsis(title, 24) if title else None


class UserModelScene(LectureScene):
    """Mixin (before the lecture scene in the bases): the experiment ``model``, one seed unless ``--set seeds``
    says more, the blocks' names from the trace (``self.block_names``, also in the numbers JSON under
    ``"blocks"``) and ``{model}`` in every string."""

    experiment = MODEL_EXPERIMENT
    experiment_defaults: dict = {}  # one seed: training a user's network twice per seed costs the most
    # The runs the scene draws, and (required_arrays) their arrays: where the runs are read from trace files
    # (--trace: a watched run records no test error; without --twin there is no plain twin) the render planner
    # refuses a scene whose files lack one (cli.plan.undrawable).
    needs_runs: tuple[str, ...] = (PLAIN, RESIDUAL)
    required_arrays: tuple[str, ...] = ("step", "out_grad_norm")
    min_records = 1  # the recorded steps each file must hold (one that draws a course over training: 2)

    def setup(self) -> None:
        super().setup()
        if RESIDUAL not in self.traces:
            raise ValueError(f"{type(self).__name__} needs the run {RESIDUAL!r}; got {sorted(self.traces)}")
        residual = self.traces[RESIDUAL]
        self.block_names = block_names(residual)
        for name in (PLAIN,):
            if name in self.traces and block_names(self.traces[name]) != self.block_names:
                raise ValueError(f"{type(self).__name__}: the runs {RESIDUAL!r} and {name!r} have different blocks")
        self.model_name = model_title(residual) or self.string("your_model", self.lang, self.text_overrides)
        self.numbers["blocks"] = list(self.block_names)
        self.numbers["model"] = self.model_name

    def t(self, key: str, **fmt) -> str:
        return super().t(key, **{"model": getattr(self, "model_name", ""), **fmt})

    def narrate(self, key: str, duration: float = 2.0, **fmt) -> None:
        super().narrate(key, duration, **{"model": getattr(self, "model_name", ""), **fmt})

    def block_labels(self, xs, bounds=None, below=None, buff: float = 0.12) -> VGroup:
        """The blocks' names under blocks centred at ``xs`` (see :class:`BlockLabels`), with the shared prefix
        as a heading line under them when there is one (shortened with a middle ellipsis to the labels'
        bounds); moved straight down to ``buff`` under ``below`` (a mobject or a y) when given (x is kept: the
        labels sit under their blocks)."""
        labels = BlockLabels(self.block_names, xs, bounds)
        group = VGroup(labels)
        if labels.heading is not None:
            room = labels.bounds[1] - float(xs[0])
            text = labels.plan.heading
            heading = make_text(self.t("blocks_heading", heading=text), size=SIZE_SMALL, color=PALETTE["muted"])
            while heading.width > room and len(text) > 4:
                text = middle_ellipsis(labels.plan.heading, max(4, int(len(text) * room / heading.width) - 1))
                heading = make_text(self.t("blocks_heading", heading=text), size=SIZE_SMALL, color=PALETTE["muted"])
            heading.next_to(labels, DOWN, buff=0.08)
            group.add(heading.shift((float(xs[0]) - heading.get_left()[0]) * RIGHT))
        if below is not None:
            bottom = below if isinstance(below, (int, float)) else below.get_bottom()[1]
            group.shift((bottom - buff - group.get_top()[1]) * UP)
        return group


class ModelGradientFlowOverTraining(UserModelScene, GradientFlowOverTraining):
    """The backward pulse through your model and its plain twin, block by block, at step 0 and across training."""

    needs_runs = (RESIDUAL,)  # the twin's row only with --twin (a run watched alone is drawn alone)
    required_arrays = ("step", "out_grad_norm", "loss_curve")
    param_limits = {"decades": (1, 40)}
    _row_y = {"plain": 1.3, "residual": -0.85}  # apart enough for the names between the rows
    _single_row_y = 0.6  # the residual row alone
    _lane_drop = 0.7
    _source = "He et al. 2016, eq. 4-5; He et al. 2015, §1"

    def flow_runs(self) -> tuple[str, ...]:
        """Your network and its twin; your network alone, in one row higher up, without ``--twin``."""
        if PLAIN in self.traces:
            return PLAIN, RESIDUAL
        self._row_y = {**self._row_y, RESIDUAL: self._single_row_y}
        self.scale_caption = "scale_one"
        self.intro_key = "n_intro_alone"  # no "and its plain twin": none was given
        return (RESIDUAL,)

    def row_labels(self, row: dict) -> list:
        if row["arch"] == RESIDUAL:  # under the identity lane and its name
            return [self.block_labels(row["xs"], below=row["path_y"] - 0.45, buff=0.1)]
        return [self.block_labels(row["xs"], below=row["y"] - row["block"][1] / 2, buff=0.1)]


class ModelChainRuleProduct(UserModelScene, ChainRuleProduct):
    """The backward product of your model and its plain twin at step 0, block by block, on a log axis."""

    required_arrays = ("step", "out_grad_norm", "grad_norm")
    _axes_box = (-0.55, 2.5)  # shorter than the lecture's: the blocks' names and the summary go under the axis

    def pick_runs(self) -> tuple[str, str]:
        return PLAIN, RESIDUAL

    def run_label(self, name: str) -> str:
        return self.t(name)

    def backward_steps(self, depth: int) -> list[tuple[int, int]]:
        """Output end first, ``ceil((depth - 1) / MAX_PEN_STEPS)`` blocks per step."""
        size = max(1, math.ceil((depth - 1) / MAX_PEN_STEPS))
        marks = list(range(depth - 1, 0, -size)) + [0]
        return list(zip(marks[:-1], marks[1:]))

    def factor_number(self, name, hi, l, factor, product):
        if hi == l + 1:
            return f"{name}.block.{l}.factor", factor[l]
        return f"{name}.blocks.{l}-{hi}.factor", product[l] / product[hi]

    def factor_label(self, hi: int, l: int, value: str) -> str:
        return self.t("factor", a=short_name(self.block_names[hi]), b=short_name(self.block_names[l]), value=value)

    def block_axis(self, axes, depth: int):
        xs = [axes.axes.c2p(l + 1, 0)[0] for l in range(depth)]
        left, right = axes.axes.get_left()[0], axes.axes.get_right()[0]
        return self.block_labels(xs, (left - 0.5, right + 0.4), below=axes.axes)

    def seed_claim(self, names):
        return super().seed_claim(names) if len(self.seed_traces) > 1 else None


class ModelGradientPlusOne(UserModelScene, GradientPlusOne):
    """The +1 of the shortcut in the backward pass; measured per-block gradient norms of your model and its twin."""

    required_arrays = ("step", "out_grad_norm", "grad_norm")
    _axes_box = (-0.85, 2.4)

    def backward_factors(self, traces: dict) -> tuple[dict[str, float], str]:
        """The geometric mean over the blocks of ||dL/dx|| / ||dL/dy|| (``in_grad_norm`` / ``out_grad_norm``) at
        step 0, as the line under the title says. A user's blocks are seldom chained output to input (a ResNet's
        ReLU after the addition, its stem and its head between stages), so the ratio of consecutive blocks'
        ||dL/dh|| the lecture's nets use is another number (examples/my_resnet.py: 1.23 where each block's own
        ||dL/dx|| / ||dL/dy|| has the mean 1.66). A trace without ``in_grad_norm`` (written before it was recorded)
        gets that ratio, and the line says so."""
        if all("in_grad_norm" in t.arrays for t in traces.values()):
            factors = {}
            for name, t in traces.items():
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.asarray(t["in_grad_norm"][0], np.float64) / np.asarray(t["out_grad_norm"][0], np.float64)
                good = bool(ratio.size) and bool(np.all(np.isfinite(ratio) & (ratio > 0)))
                factors[name] = float(np.exp(np.mean(np.log(ratio)))) if good else float("nan")
            return factors, "factor_sub"
        return super().backward_factors(traces)[0], "factor_sub_chain"

    def block_axis(self, axes, depth: int):
        xs = [axes.axes.c2p(l + 1, 0)[0] for l in range(depth)]
        left, right = axes.axes.get_left()[0], axes.axes.get_right()[0]
        return self.block_labels(xs, (left - 0.3, right + 0.3), below=axes.axes)


class ModelResidualResponse(UserModelScene, ResidualResponse):
    """||F(x)|| / ||x|| and the std of F(x) per residual addition of your model and its twin (He 2015, Fig. 7)."""

    required_arrays = ("step", "out_grad_norm", "input_norm", "branch_norm", "branch_std", "error")
    _chart_y = 0.0

    def bar_labels(self, depth: int) -> list[str]:
        return []  # the blocks' names go under the chart instead

    def block_axis(self, bars):
        xs = [bar.get_center()[0] for bar in bars.bars[0]]
        xs = [(a + b) / 2 for a, b in zip(xs, [bar.get_center()[0] for bar in bars.bars[-1]])]
        axis = bars.chart.axes
        return self.block_labels(xs, (axis.get_left()[0] - 0.1, axis.get_right()[0] + 0.1), below=bars.chart,
                                 buff=0.1)

    def bn_note(self, residual) -> str:
        return ""  # whether the user's blocks have BatchNorm is not recorded


class ModelDoesItOnlyCopy(UserModelScene, DoesItOnlyCopy):
    """||F(x)|| / ||x|| of every residual addition of your model over training, beside the loss."""

    needs_runs = (RESIDUAL,)
    required_arrays = ("step", "out_grad_norm", "input_norm", "branch_norm", "loss")
    min_records = 2  # the ratio's course (simulation.summary.ratio_course) needs a start and an end

    def end_block_names(self, depth: int) -> tuple[str, str]:
        return short_name(self.block_names[0], 20), short_name(self.block_names[-1], 20)

    def seed_line_shown(self, total: int) -> bool:
        """Only over several seeds: one run (a watched run has no seed) agreeing with itself says nothing."""
        return total > 1


class ModelDegradation(UserModelScene, Degradation):
    """Training and test error of your model and its plain twin, drawn as they train (He 2015, Fig. 1, 6)."""

    required_arrays = ("step", "out_grad_norm", "error_curve", "test_error")

    def construct(self) -> None:
        runs = [name for name in (PLAIN, RESIDUAL) if name in self.traces]
        if runs != [PLAIN, RESIDUAL]:
            raise ValueError(f"{type(self).__name__} needs the runs plain and residual; got {sorted(self.traces)}")
        steps = len(self.traces[RESIDUAL]["error_curve"])
        window = smoothing_window(steps)
        curves = {}
        for name in runs:
            curves[name] = error_curve(self.traces[name])
            for step, value in zip(*curves[name]):
                self.number(f"{name}.step.{int(step)}.smoothed_error", value)
        tests = {name: (np.asarray(self.traces[name]["step"], np.float64),
                        np.asarray(self.traces[name]["test_error"], np.float64)) for name in runs}
        for name, (at, values) in tests.items():
            for step, value in zip(at, values):
                self.number(f"{name}.step.{int(step)}.test_error", value)
        final = {name: curves[name][1][-1] for name in runs}
        seed_final = {name: self.across_seeds(name, lambda t: error_curve(t)[1][-1]) for name in runs}
        for name, by_seed in seed_final.items():
            for seed, value in by_seed.items():
                self.number(f"{name}.seed.{seed}.final_error_pct", 100 * value)
        verdicts = [compare(seed_final[PLAIN][s], seed_final[RESIDUAL][s], 0.01) for s in seed_final[PLAIN]
                    if s in seed_final[RESIDUAL]]
        k, n = count_true(v for v in verdicts if v is not None)
        worse = compare(final[PLAIN], final[RESIDUAL], 0.01)  # the twin's final error above the model's by 1 point
        highest = finite_max(np.concatenate([c[1] for c in curves.values()] + [v for _, v in tests.values()]),
                             default=0.1)
        y_top = min(1.0, float(np.ceil(highest * 10 + 1e-9) / 10) or 0.1)
        labels = {PLAIN: self.t("plain"), RESIDUAL: self.t("residual")}

        # 1. Title and what is held fixed.
        title = self.title("title")
        subtitle = self.text("subtitle", size=SIZE_SMALL, color=PALETTE["muted"], blocks=len(self.block_names))
        subtitle.next_to(title, DOWN, buff=0.15)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(subtitle), run_time=1.5)

        # 2. Training error as they train; 3. test error at the records. Laid out before anything is drawn: the
        # verdict of step 4 (measured now) sits above the floor, the legend above it, the charts above both.
        with self.unrecorded():  # recorded in the beats that show them
            verdict = make_wrapped_text(self._verdict(final, worse, k, n), line_width(), size=SIZE_LABEL)
            legend = self._legend(runs, labels, final)
        note = None
        if len(self.seed_traces) > 1:
            note = self.text("seed_band", size=SIZE_SMALL, color=PALETTE["muted"], n=len(self.seed_traces))
            note.to_corner(DOWN + LEFT, buff=[EDGE_BUFF, 0.3, 0])
        floor = note.get_top()[1] + self._gap if note is not None else -config.frame_y_radius + 0.62
        floor = max(floor, self._citation(self._source).get_top()[1] + MIN_GAP)  # clear of the citation (a full line)
        last_step = float(max(steps - 1, 1))
        panels = [("panel_train", "n_train", {name: curves[name] for name in runs}),
                  ("panel_test", "n_test", tests)]
        height, chart_y = self._chart_height, self._chart_y
        for _ in range(3):  # as planned; again, raised and (where that is not enough) shorter, if the words need it
            charts = [self._chart(col, key, last_step, y_top, window, height, chart_y)
                      for col, (key, _, _) in enumerate(panels)]
            legend_top = charts[0]["x_label"].get_bottom()[1] - 0.15
            short = floor + verdict.height + self._gap + legend.height - legend_top  # past the floor, scene units
            room = subtitle.get_bottom()[1] - self._gap - max(c["heading"].get_top()[1] for c in charts)
            if short <= 1e-9 and room >= -1e-9:
                break
            short = max(short, 0.0)
            lift = min(short, max(0.0, room))
            drop = max(0.0, -room)  # headings wrapped onto two lines (step 2's _chart) that reach the subtitle
            shorter = min(short - lift + drop, height - self._chart_height / 2)  # never below half the planned height
            height, chart_y = height - shorter, chart_y + lift - drop + shorter / 2  # the charts' top: up by lift - drop
        for (heading_key, narration, data), parts in zip(panels, charts):
            chart, heading, x_label = parts["chart"], parts["heading"], parts["x_label"]
            lines = [chart.polyline(*data[name], color=PALETTE[name], stroke_width=4, what=f"{name}.{heading_key}")
                     for name in runs]
            self.narrate(narration, 3.5)
            self.play(Create(chart), FadeIn(heading), FadeIn(x_label), run_time=1.0)
            self.draw_with_pens(lines, run_time=4)
            if heading_key == "panel_train":
                bands = VGroup(*[self.seed_band(chart, name, PALETTE[name]) for name in runs])
                self.play(FadeIn(bands), run_time=0.5)
        legend = self._legend(runs, labels, final)
        legend.next_to(charts[0]["x_label"], DOWN, buff=0.15).align_to(charts[0]["chart"], LEFT)
        self.play(FadeIn(legend), run_time=0.6)

        # 4. The verdict, computed from the runs (the text measured in step 2, its numbers recorded now).
        self._verdict(final, worse, k, n)
        verdict.to_edge(LEFT, buff=EDGE_BUFF).shift((floor - verdict.get_bottom()[1]) * UP)  # never shrunk
        self.narrate("n_verdict", 3)
        self.play(FadeIn(verdict, shift=UP * 0.2), run_time=1.2)
        self.cite(self._source)
        if note is not None:
            self.add(note)
        self.wait(4)

    _chart_y = 0.3  # centre y of both charts (raised where the words under them need the room: step 2)
    _chart_height = 2.5  # their height (shorter where raising them is not enough)
    _gap = 0.15  # the least space between the verdict and what is above or below it

    def _chart(self, col: int, heading_key: str, last_step: float, y_top: float, window: int, height: float,
               chart_y: float) -> dict:
        """Panel ``col`` (0: training error, 1: test error): its axes ``height`` high centred at ``chart_y``, its
        heading and its x label, placed, not drawn."""
        chart = LinearAxes((0, last_step), (0, y_top), width=5.0, height=height, y_format=lambda v: f"{v * 100:g}%")
        chart.move_to([-3.45 + 7.0 * col, chart_y, 0])
        heading = self.heading(heading_key, size=SIZE_LABEL, window=window)  # longer words: two lines, never shrunk
        inside_margin(heading.next_to(chart.axes, UP, buff=0.25))
        x_label = self.text("axis_step", size=SIZE_SMALL, color=PALETTE["muted"]).next_to(chart, DOWN, buff=0.08)
        return {"chart": chart, "heading": heading, "x_label": x_label}

    def _legend(self, runs: list[str], labels: dict, final: dict) -> VGroup:
        """Each run's final training error in its colour (not placed; its numbers recorded unless unrecorded)."""
        return make_legend([(self.t("curve", run=labels[name], error=self.percent(f"{name}.final_error", final[name])),
                             PALETTE[name]) for name in runs], size=SIZE_SMALL)

    def _verdict(self, final: dict, worse: bool | None, k: int, n: int) -> str:
        """The verdict, its numbers recorded (unless :meth:`unrecorded`)."""
        key = {True: "twin_worse", False: "twin_not_worse", None: "no_verdict"}[worse]
        self.number("plain.worse.seeds", k)
        self.number("plain.worse.of", n)
        verdict = self.t(key, plain=self.percent("plain.final_error", final[PLAIN]),
                         residual=self.percent("residual.final_error", final[RESIDUAL]))
        if n > 1:
            verdict = f"{verdict} ({self.t('seed_count', k=k, n=n)})"
        return verdict


# The scenes a user's model can be drawn with, in lecture order, and the lecture scene each one varies.
MODEL_SCENES = [ModelChainRuleProduct, ModelGradientPlusOne, ModelGradientFlowOverTraining, ModelDegradation,
                ModelResidualResponse, ModelDoesItOnlyCopy]
MODEL_VARIANTS = {"ChainRuleProduct": ModelChainRuleProduct, "GradientPlusOne": ModelGradientPlusOne,
                  "GradientFlowOverTraining": ModelGradientFlowOverTraining, "Degradation": ModelDegradation,
                  "ResidualResponse": ModelResidualResponse, "DoesItOnlyCopy": ModelDoesItOnlyCopy}
