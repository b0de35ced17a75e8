"""DepthSweep: a depth slider moves and the plain and residual curves grow point by point, one dot per seed.

Example::

    python render.py render DepthSweep                                   # the small default set, 3 seeds
    python render.py render DepthSweep --set mlp_depths=2,4,6,8,12,16,20,32,44,56,80,110 \\
        --set seeds=0,1,2,3,4                                            # the full MLP sweep (opt-in)
    python render.py render scenes.depth_sweep:DepthSweepConv           # He et al.'s conv nets

Left: the first block's ||dL/dW|| over the last block's at step 0 (log axis); right: the final training
error (mean of the last tenth of the steps), both against depth, for plain and residual nets. Each depth
shows a dot per seed, a bar over the seeds' range and a curve through their medians. The verdict lines
count the seeds that show each claim. Source: He et al. 2015, §1 and Fig. 1 (deeper plain nets: vanishing
signal, higher training error); He et al. 2016, eq. 5 (the identity keeps the ratio near 1).

The runs are the ``depth_sweep`` experiment's (docs/how-to/sweeps.md); :func:`sweep_points` reads only each
trace's config and arrays, so any run set of plain and residual nets at several depths works (the
``vanishing`` experiment's too). A run that diverged has no final error: it is drawn as a cross at the top
of the error panel and counted as training worse.
"""

from __future__ import annotations

import math

import numpy as np
from manim import DOWN, LEFT, RIGHT, UP, Create, Dot, FadeIn, Line, Transform, VGroup, VMobject

from scenes.kit.base import LectureScene
from scenes.degradation import MARGIN
from scenes.kit.helpers import compare, is_missing, steps_run
from scenes.kit.layout import line_width
from scenes.kit.seeds import SeedSpread, count_true, seed_range
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import (LinearAxes, LogAxes, axes_gap, gapped_polyline, log_floor_exponent, nice_ticks,
                               safe_log10)
from scenes.kit.theme import stroke_opacity
from simulation.summary import tail_mean

__all__ = ["DepthSweep", "DepthSweepConv", "sweep_points", "sweep_counts", "first_over_last", "trains_worse",
           "decades_per_block", "ratio_decades", "depth_spread", "median_slope"]

ARCHS = ("plain", "residual")


def first_over_last(trace) -> float:
    """``grad_norm[0, 0] / grad_norm[0, -1]``: the first block's ||dL/dW|| over the last block's at step 0."""
    g = np.asarray(trace["grad_norm"][0], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(g[0] / g[-1])


def sweep_points(seed_traces: dict[int, dict], model: str = "mlp") -> dict[str, dict[int, dict[int, dict]]]:
    """``{arch: {depth: {seed: {"ratio": ..., "error": ..., "diverged": ...}}}}`` from
    ``{seed: {run_name: Trace}}``, for the runs of ``model`` ("mlp" | "conv"; a trace without the field is
    an MLP).

    ``ratio`` is :func:`first_over_last`; ``error`` the final training error (``tail_mean`` of
    ``error_curve``, NaN for a run that diverged, and NaN (missing) when a value of the steps it ran is
    missing); ``diverged`` 1.0 or 0.0. Raises ValueError when an
    architecture has no run, or two runs of one seed share an architecture and depth."""
    out: dict[str, dict[int, dict[int, dict]]] = {arch: {} for arch in ARCHS}
    for seed, traces in seed_traces.items():
        for name, trace in traces.items():
            cfg = trace.run_config
            if getattr(cfg, "arch", None) not in out or getattr(cfg, "model", "mlp") != model:
                continue
            cell = out[cfg.arch].setdefault(int(cfg.depth), {})
            if seed in cell:
                raise ValueError(f"two {cfg.arch} runs of depth {cfg.depth} for seed {seed} (one is {name!r})")
            diverged = bool(trace.meta.diverged)
            curve = np.asarray(trace["error_curve"], dtype=np.float64)
            lacks = bool(np.isnan(curve[:steps_run(trace, len(curve))]).any())  # a missing value where it ran
            cell[seed] = {"ratio": first_over_last(trace),
                          "error": float("nan") if diverged or lacks else tail_mean(curve),
                          "diverged": float(diverged)}
    for arch, depths in out.items():
        if not depths:
            raise ValueError(f"no {model} {arch} run to sweep; got {sorted(n for t in seed_traces.values() for n in t)}")
        out[arch] = dict(sorted(depths.items()))
    return out


def trains_worse(deep: dict, shallow: dict, margin: float = MARGIN) -> bool | None:
    """Whether the deeper run of one seed trains worse than the shallower: its final error is higher by
    more than ``margin``, or it diverged while the shallower did not. None when an error that decides
    it is missing (a run that did not diverge but has no error): no verdict rests on a gap."""
    if deep["diverged"] or shallow["diverged"]:
        return bool(deep["diverged"]) and not shallow["diverged"]
    return compare(deep["error"], shallow["error"], margin)


def _lacks(cell: dict, key: str) -> bool:
    """Whether ``cell[key]`` is missing from the trace (not a diverged run's absent error)."""
    return is_missing(cell[key]) and not (key == "error" and cell["diverged"])


def _count_known(flags) -> tuple[int, int]:
    """count_true over the flags that are not None (a seed whose verdict rests on a missing value)."""
    return count_true(f for f in flags if f is not None)


def sweep_counts(points: dict[str, dict[int, dict[int, dict]]], seeds: list[int]) -> dict[str, tuple[int, int]]:
    """The sweep's four claims as (k, n) over the seeds with a verdict, from :func:`sweep_points` (the
    shallowest and deepest depth of each architecture compared within one seed; He et al. 2015, §1):

    - ``plain.ratio_falls``: the deepest plain net's first / last ratio is below a tenth of the shallowest's;
    - ``residual.ratio_within_decade``: every residual depth's ratio lies in [0.1, 10] (a seed of ``seeds``
      with a missing ratio at any depth has no verdict);
    - ``plain.deeper_worse`` / ``residual.deeper_worse``: :func:`trains_worse` of deepest against shallowest.

    A seed whose verdict rests on a missing value is not counted (n falls)."""
    depths = sorted(set(points["plain"]) | set(points["residual"]))
    shallow, deep = depths[0], depths[-1]
    plain, residual = points["plain"], points["residual"]
    plain_falls = _count_known(compare(0.1 * plain[shallow][s]["ratio"], plain[deep][s]["ratio"])
                               for s in plain[deep] if s in plain[shallow])
    residual_holds = _count_known(
        None if any(is_missing(residual[d][s]["ratio"]) for d in residual if s in residual[d])
        else all(0.1 <= residual[d][s]["ratio"] <= 10 for d in residual if s in residual[d])
        for s in seeds)
    plain_worse, residual_worse = (_count_known(trains_worse(points[a][deep][s], points[a][shallow][s])
                                                for s in points[a][deep] if s in points[a][shallow])
                                   for a in ARCHS)
    return {"plain.ratio_falls": plain_falls, "residual.ratio_within_decade": residual_holds,
            "plain.deeper_worse": plain_worse, "residual.deeper_worse": residual_worse}


def decades_per_block(depths: list[int], ratios: list[float]) -> float:
    """Least-squares slope of log10(ratio) against depth (decades per block); NaN with under two finite
    positive points."""
    x = np.asarray(depths, dtype=np.float64)
    y = safe_log10(ratios, floor=np.nan)
    ok = np.isfinite(y) & (np.asarray(ratios, dtype=np.float64) > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(x[ok], y[ok], 1)[0])


def ratio_decades(ratios) -> tuple[int, int]:
    """(lowest, highest) power of ten of the ratio panel's log axis: at least [-1, 1], widened to the positive
    finite ``ratios`` (an underflowed 0 is drawn on the floor, so it does not lower it)."""
    positive = np.asarray([r for r in ratios if math.isfinite(r) and r > 0], dtype=np.float64)
    if not positive.size:
        return -1, 1
    return min(-1, log_floor_exponent(positive)), max(1, int(np.ceil(np.log10(positive.max()))))


def depth_spread(cells: dict[int, dict], key: str) -> tuple[list[float], list[int], tuple[float, float, float]]:
    """One architecture and depth of :func:`sweep_points` (``{seed: cell}``): the seeds' ``key`` values in seed
    order, the seeds lacking it, and (lowest, median, highest) by :func:`scenes.kit.seeds.seed_range`; the median is
    NaN when a seed lacks its value (a median over the seeds without one of them is not shown)."""
    order = sorted(cells)
    values = [cells[s][key] for s in order]
    lacking = [s for s in order if _lacks(cells[s], key)]
    low, mid, high = seed_range(values)
    return values, lacking, (low, float("nan") if lacking else mid, high)


def median_slope(medians: list[tuple[int, float]]) -> float:
    """:func:`decades_per_block` of ``[(depth, median ratio)]``; NaN when any median is missing."""
    return float("nan") if any(is_missing(v) for _, v in medians) else decades_per_block(*zip(*medians))


class DepthSweep(SeedSpread, LectureScene):
    """Gradient ratio and training error against depth, plain vs residual, grown depth by depth with every seed."""

    experiment = "depth_sweep"
    model: str = "mlp"  # which nets of the sweep: "mlp" (sigmoid MLPs) | "conv" (He et al. 2015 §4.2 ResNets)
    param_limits = {"model": ("mlp", "conv")}
    experiment_defaults = {"seeds": (0, 1, 2), "models": ("mlp",)}  # train only the nets drawn

    _source = "He et al. 2015, §1, Fig. 1; He et al. 2016, eq. 5"
    _track_y = -1.6  # the depth slider's track (scene units)

    @staticmethod
    def _cross(point: np.ndarray, arch: str, size: float = 0.07) -> VGroup:
        return VGroup(Line(point + size * (UP + LEFT), point + size * (DOWN + RIGHT)),
                      Line(point + size * (UP + RIGHT), point + size * (DOWN + LEFT))).set_stroke(PALETTE[arch], 3)

    @staticmethod
    def _seed_dot(point: np.ndarray, arch: str, hollow: bool = False) -> Dot:
        """One seed's value; hollow where the ratio underflowed to 0 (drawn on the axis floor)."""
        dot = Dot(point, radius=0.05, color=PALETTE[arch], fill_opacity=0.0 if hollow else 0.85)
        return dot.set_stroke(PALETTE[arch], width=2 if hollow else 0)

    def construct(self) -> None:
        points = sweep_points(self.seed_traces, self.model)
        depths = sorted(set(points["plain"]) | set(points["residual"]))
        seeds = sorted(self.seed_traces)
        self._record_points(points)
        ratio_axes, error_axes = self._beat_panels(points, depths, seeds)
        medians = self._beat_slider(points, depths, ratio_axes, error_axes)
        self._beat_verdicts(points, seeds, medians)

    def _record_points(self, points: dict) -> None:
        """Every seed's ratio, error and divergence at every depth into the numbers JSON."""
        for arch, by_depth in points.items():
            for depth, cells in by_depth.items():
                for seed, cell in cells.items():
                    for key, value in cell.items():
                        self.number(f"{arch}.d{depth}.seed.{seed}.{key}", value)

    def _beat_panels(self, points: dict, depths: list[int], seeds: list[int]):
        """1. Title and the two empty panels, sized to every run of the sweep: returns (ratio_axes, error_axes)."""
        any_trace = next(t for t in self.seed_traces[seeds[0]].values()
                         if getattr(t.run_config, "model", "mlp") == self.model)
        steps = int(any_trace.run_config.steps)
        nets = self.t(f"nets_{self.model}", act=any_trace.run_config.activation)
        title = self.title("title")
        subtitle = self.text("subtitle", size=SIZE_SMALL, color=PALETTE["muted"], nets=nets, steps=steps,
                             seeds=len(seeds))
        subtitle.next_to(title, DOWN, buff=0.12)
        ratios = [c["ratio"] for by in points.values() for cells in by.values() for c in cells.values()]
        exp_min, exp_max = ratio_decades(ratios)
        d_max = float(max(depths))
        x_ticks = [t for t in nice_ticks(0, d_max, 5) if t <= d_max]
        ratio_axes = LogAxes((0, d_max, max(1.0, d_max / 10)), (exp_min, exp_max), width=5.2, height=2.3)
        ratio_axes.move_to([-3.35, 0.55, 0])
        error_axes = LinearAxes((0, d_max), (0, 1), width=5.2, height=2.3, x_ticks=x_ticks,
                               y_format=lambda v: f"{v * 100:g}%")
        error_axes.move_to([3.55, 0.55, 0])
        for tick in x_ticks:  # LogAxes draws no x labels: the same depth ticks as the error panel
            label = make_text(f"{tick:g}", size=SIZE_SMALL, color=PALETTE["muted"])
            ratio_axes.ticks.add(label.next_to(ratio_axes.axes.c2p(tick, 0), DOWN, buff=0.1))
        labels = VGroup()
        for axes, key in ((ratio_axes, "ratio_axis"), (error_axes, "error_axis")):
            head = self.text(key, size=SIZE_SMALL, color=PALETTE["text"])
            labels.add(head.next_to(axes.axes, UP, buff=0.15).align_to(axes.axes, LEFT))
        legend = VGroup(*[self.text(f"legend_{arch}", size=SIZE_SMALL, color=PALETTE[arch]) for arch in ARCHS])
        if any(r == 0 for r in ratios):  # a float32 gradient that underflowed: no point on a log axis
            legend.add(self.text("underflow", size=SIZE_SMALL, color=PALETTE["muted"]))
        if any(c["diverged"] for by in points.values() for cells in by.values() for c in cells.values()):
            legend.add(self.text("diverged", size=SIZE_SMALL, color=PALETTE["muted"]))
        legend.arrange(RIGHT, buff=0.4).next_to(subtitle, DOWN, buff=0.12)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(subtitle), FadeIn(legend), run_time=1)
        self.play(Create(ratio_axes.axes), FadeIn(ratio_axes.ticks), Create(error_axes.axes),
                  FadeIn(error_axes.ticks), FadeIn(labels), run_time=1.2)
        return ratio_axes, error_axes

    def _beat_slider(self, points: dict, depths: list[int], ratio_axes, error_axes) -> dict:
        """2. The slider: one stop per depth; each stop adds that depth's dots, range bars and curve segment.
        Returns the medians drawn, ``{arch: {panel: [(depth, median)]}}``."""
        d_max = float(max(depths))
        track_y = self._track_y
        track = Line([-5.5, track_y, 0], [5.5, track_y, 0], color=PALETTE["muted"], stroke_width=3)
        to_x = lambda d: -5.5 + 11.0 * d / d_max  # noqa: E731
        stops = VGroup(*[Line([to_x(d), track_y - 0.08, 0], [to_x(d), track_y + 0.08, 0], color=PALETTE["muted"],
                              stroke_width=2) for d in depths])
        knob = Dot([to_x(depths[0]), track_y, 0], radius=0.11, color=PALETTE["text"])
        knob_label = self.text("slider", size=SIZE_SMALL, depth=depths[0]).next_to(knob, DOWN, buff=0.12)
        self.play(Create(track), FadeIn(stops), FadeIn(knob), FadeIn(knob_label), run_time=0.8)
        self.narrate("n_grow", 4)
        medians = {arch: {} for arch in ARCHS}
        curves = {(arch, panel): None for arch in ARCHS for panel in ("ratio", "error")}
        per_depth = min(3.2, 14.0 / len(depths))  # the slider phase lasts about 10-14 s whatever the depths
        for depth in depths:
            new_label = self.text("slider", size=SIZE_SMALL, depth=depth).next_to([to_x(depth), track_y, 0], DOWN,
                                                                                 buff=0.23)
            self.play(knob.animate.move_to([to_x(depth), track_y, 0]), Transform(knob_label, new_label),
                      run_time=per_depth * 0.4)
            shown = []
            for arch in ARCHS:
                cells = points[arch].get(depth)
                if not cells:
                    continue
                shift = -0.25 if arch == "plain" else 0.25  # dots of the two nets side by side at one depth
                for panel, axes, key in (("ratio", ratio_axes, "ratio"), ("error", error_axes, "error")):
                    values, lacking, (low, mid, high) = depth_spread(cells, key)
                    medians[arch].setdefault(panel, []).append((depth, mid))
                    self.number(f"{arch}.d{depth}.median_{key}", mid)
                    where = (lambda d, v: ratio_axes.point(d, v)) if panel == "ratio" else \
                        (lambda d, v: error_axes.point(d, v))
                    nudge = np.array([shift * axes.axes.x_axis.get_unit_size() * d_max / 60, 0, 0])
                    dots = VGroup(*[self._seed_dot(where(depth, v) + nudge, arch, hollow=v == 0 and panel == "ratio")
                                    for v in values if math.isfinite(v)])
                    if panel == "error":  # a diverged run has no error: a cross at the top of the panel
                        dots.add(*[self._cross(error_axes.point(depth, 1.0) + nudge, arch)
                                   for s in sorted(cells) if cells[s]["diverged"]])
                    if math.isfinite(low):
                        bar = Line(where(depth, low) + nudge, where(depth, high) + nudge, color=PALETTE[arch],
                                   stroke_width=2, stroke_opacity=stroke_opacity(PALETTE[arch], 0.6, 2))
                        dots.add(bar)
                    for s in lacking:  # a labelled gap where the trace lacks this seed's value
                        dots.add(axes_gap(axes.axes, [depth], 0, 1, f"{arch}.d{depth}.seed.{s}.{key}"))
                    shown.append(FadeIn(dots, scale=1.4))
                    gapped = self._lacking_median(points[arch], panel, key, medians[arch][panel])
                    pts = [where(d, v) for d, v in medians[arch][panel] if math.isfinite(v)]
                    if gapped:
                        pieces = gapped_polyline([where(d, v) if math.isfinite(v) else None
                                                  for d, v in medians[arch][panel]], PALETTE[arch], 3)
                        old = curves[(arch, panel)]
                        if old is not None:
                            self.remove(old)
                        self.add(pieces)
                        curves[(arch, panel)] = pieces
                    elif len(pts) >= 2:
                        curve = VMobject(color=PALETTE[arch], stroke_width=3).set_points_as_corners(pts)
                        old = curves[(arch, panel)]
                        if old is not None:
                            self.remove(old)
                        self.add(curve)
                        curves[(arch, panel)] = curve
            self.play(*shown, run_time=per_depth * 0.6)
        self.wait(1)
        return medians

    def _beat_verdicts(self, points: dict, seeds: list[int], medians: dict) -> None:
        """3. The verdicts, counted over the seeds."""
        counts = sweep_counts(points, seeds)
        slope = median_slope(medians["plain"]["ratio"])
        for key, (k, total) in counts.items():
            self.number(f"{key}.seeds", k)
            self.number(f"{key}.of", total)
        plain_falls, residual_holds, plain_worse, residual_worse = counts.values()
        # a seed whose verdict rests on a missing value is not counted: then each claim's own n
        n = {key: (total if self.numbers["missing"] else len(seeds))
             for key, (_, total) in zip(("plain_falls", "residual_holds", "plain_worse", "residual_worse"), counts.values())}
        margin = self.number("error_margin_points", 100 * MARGIN)
        left = VGroup(
            self.text("plain_ratio", size=SIZE_SMALL, color=PALETTE["plain"]),
            self.text("plain_ratio_count", size=SIZE_SMALL, color=PALETTE["plain"], k=plain_falls[0], n=n["plain_falls"],
                      slope=self.number("plain.decades_per_block", slope)),
            self.text("residual_ratio", size=SIZE_SMALL, color=PALETTE["residual"]),
            self.text("residual_ratio_count", size=SIZE_SMALL, color=PALETTE["residual"], k=residual_holds[0], n=n["residual_holds"]),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.08)
        right = VGroup(
            self.text("plain_error", size=SIZE_SMALL, color=PALETTE["plain"]),
            self.text("error_count", size=SIZE_SMALL, color=PALETTE["plain"], k=plain_worse[0], n=n["plain_worse"], margin=margin),
            self.text("residual_error", size=SIZE_SMALL, color=PALETTE["residual"]),
            self.text("error_count", size=SIZE_SMALL, color=PALETTE["residual"], k=residual_worse[0], n=n["residual_worse"],
                      margin=margin),
        ).arrange(DOWN, aligned_edge=LEFT, buff=0.08)
        for column, x in ((left, -line_width() / 2), (right, 0.3)):  # never scaled down: the legibility floor
            column.next_to([x, self._track_y - 0.5, 0], DOWN + RIGHT, buff=0)
        lines = VGroup(left, right)
        self.narrate("n_verdict", 4)
        self.play(FadeIn(lines, shift=UP * 0.2), run_time=1)
        self.cite(self._source)
        self.wait(5)

    @staticmethod
    def _lacking_median(by_depth: dict, panel: str, key: str, medians: list) -> bool:
        """Whether a median drawn so far is missing (a seed's value is): the curve is then drawn in
        pieces, never bridged over that depth (False: the curve of an intact trace, as before)."""
        return any(_lacks(cell, key) for d, _ in medians for cell in by_depth.get(d, {}).values())


class DepthSweepConv(DepthSweep):
    """The same sweep for He et al. 2015 §4.2's conv nets (6n+2 layers, ReLU + BatchNorm), plain vs residual."""

    model = "conv"
    experiment_defaults = {"seeds": (0, 1, 2), "models": ("conv",)}
    _source = "He et al. 2015, §4.2, Fig. 6"
