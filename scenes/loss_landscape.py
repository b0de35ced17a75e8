"""LossLandscape: the loss around trained conv nets with and without skips, on a filter-normalised 2-D slice.

Example::

    python render.py render LossLandscape --quality l --set seeds=0,1,2,3,4

Li, Xu, Taylor, Studer & Goldstein 2018 (Fig. 1, Fig. 5) drew the loss of ResNet-20/56/110 and their twins
without shortcuts on a random 2-D slice through the trained weights, each direction filter-normalised: the
slices with skips stay one smooth bowl as depth grows, those without turn chaotic, and (Fig. 7) the chaotic
ones curve downwards (large |lambda_min / lambda_max|) over much of the slice. The ``loss_landscape``
experiment repeats this on digits (:mod:`simulation.kinds.landscape`). The scene draws each slice as a map of the
loss with contour lines, then as a map of how strongly the surface curves down (the slice's own 2-D Hessian,
:func:`simulation.summary.curvature_ratio`), and says per net what fraction of the slice is non-convex, how
many local minima the grid holds, and on how many seeds the deepest net without skips is the less convex.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from manim import DOWN, LEFT, UP, Create, Dot, FadeIn, FadeOut, Square, VGroup, VMobject, interpolate_color

from scenes.kit.base import LectureScene
from scenes.kit.fit import citation_room
from scenes.kit.helpers import is_missing
from scenes.kit.layout import EDGE_BUFF, MIN_GAP
from scenes.kit.seeds import SeedSpread
from scenes.kit.style import PALETTE, SIZE_LABEL, SIZE_SMALL, make_text
from scenes.kit.widgets import GapMark
from simulation.experiments import depth_run
from simulation.summary import curvature_ratio, slice_figures

__all__ = ["LossLandscape", "landscape_claim", "claim_by_seed", "slice_depths", "MARGIN", "UNTRAINED"]

# The slice without skips counts as "more non-convex" when its non-convex fraction exceeds the residual
# slice's by more than this (a fraction of the grid's interior points).
MARGIN = 0.05
# A net whose test error stays above this did not train (ten digits: chance is 0.9).
UNTRAINED = 0.5
PANEL = 2.75  # side of one slice's map, scene units, where the words under the slices leave the room
SLICE_TOP = 1.725  # the top of the slices' row, scene units
INNER_GAP, PAIR_GAP = 0.15, 0.55  # between the two slices of one depth, and between depths


def landscape_claim(plain: Mapping[str, Any], residual: Mapping[str, Any], margin: float = MARGIN) -> bool | None:
    """Li et al. 2018's claim on one pair of slices of the same depth: the one without skips is non-convex
    at a larger fraction of its points than the one with skips (by more than ``margin``). Arguments are
    traces (``coords``, ``loss_grid``); None when a fraction cannot be computed (missing values)."""
    a, b = slice_figures(plain)["nonconvex_fraction"], slice_figures(residual)["nonconvex_fraction"]
    if is_missing(a) or is_missing(b):
        return None
    return bool(a > b + margin)


def slice_depths(runs: Mapping[str, Any]) -> list[int]:
    """The depths that have both a plain and a residual run among ``runs`` (keys ``plain_d20`` ...), ascending."""
    return sorted(d for d in {t.run_config.depth for t in runs.values()}
                  if depth_run("plain", d) in runs and depth_run("residual", d) in runs)


def claim_by_seed(seed_traces: Mapping[int, Mapping[str, Any]], depth: int) -> dict[int, bool | None]:
    """:func:`landscape_claim` at ``depth`` for every seed that has both runs: ``{seed: verdict}``."""
    plain, residual = depth_run("plain", depth), depth_run("residual", depth)
    return {seed: landscape_claim(runs[plain], runs[residual]) for seed, runs in seed_traces.items()
            if plain in runs and residual in runs}


COLOR_LEVELS = 24  # a map's colours are quantised to this many steps: one VMobject per step, not per cell


def _cell_map(values: np.ndarray, frame: VMobject, low, high, missing) -> VGroup:
    """``values`` [G, G] in [0, 1] (row i = alpha_i to the right, column j = beta_j upwards) as flat cells
    over ``frame``, coloured between ``low`` and ``high`` in :data:`COLOR_LEVELS` steps; NaN cells get
    ``missing``. Cells of one colour form one VMobject (many closed sub-paths), so a 21 x 21 map costs a few
    dozen mobjects a frame. Cells overlap by 2 % so that no seam shows between them."""
    values = np.asarray(values, np.float64)
    grid = values.shape[0]
    cell = frame.width / grid
    corner = frame.get_corner(DOWN + LEFT)
    level = np.where(np.isnan(values), -1, np.clip(np.round(np.nan_to_num(values) * (COLOR_LEVELS - 1)), 0,
                                                    COLOR_LEVELS - 1)).astype(int)
    pad = 0.01 * cell
    out = VGroup()
    for q in np.unique(level):
        color = missing if q < 0 else interpolate_color(low, high, q / (COLOR_LEVELS - 1))
        shape = VMobject(stroke_width=0, fill_color=color, fill_opacity=1.0)
        for n, (i, j) in enumerate(np.argwhere(level == q)):
            x0, y0 = corner[0] + i * cell - pad, corner[1] + j * cell - pad
            square = [np.array([x, y, 0.0]) for x, y in ((x0, y0), (x0 + cell + 2 * pad, y0),
                                                         (x0 + cell + 2 * pad, y0 + cell + 2 * pad),
                                                         (x0, y0 + cell + 2 * pad), (x0, y0))]
            if n == 0:
                shape.set_points_as_corners(square)
            else:
                shape.start_new_path(square[0])
                shape.add_points_as_corners(square[1:])
        out.add(shape)
    return out


class LossLandscape(SeedSpread, LectureScene):
    """Filter-normalised random 2-D slices of the loss around trained conv nets, plain and residual, by depth."""

    _source = "Li et al. 2018, Fig. 5 and Fig. 7"  # cited on screen

    experiment = "loss_landscape"
    chapter = "beyond"  # ~3 min of training per seed: rendered by `render.py all --chapter beyond` (README)
    experiment_defaults = {"seeds": (0, 1, 2)}
    required_arrays = {"coords": ("grid",), "loss_grid": ("grid", "grid"), "final_test_error": ()}

    def construct(self) -> None:
        depths = slice_depths(self.traces)
        runs = [depth_run(arch, d) for d in depths for arch in ("plain", "residual")]
        figures = {run: slice_figures(self.traces[run]) for run in runs}
        for run in runs:
            t = self.traces[run]
            self.percent(f"{run}.nonconvex_fraction", figures[run]["nonconvex_fraction"])
            self.number(f"{run}.mean_curvature_ratio", figures[run]["mean_curvature_ratio"], 3)
            self.number(f"{run}.local_minima", figures[run]["local_minima"], 6)
            self.percent(f"{run}.test_error", float(t["final_test_error"]))
            grid = np.asarray(t["loss_grid"], np.float64)
            self.number(f"{run}.centre_loss", grid[grid.shape[0] // 2, grid.shape[1] // 2], 3)
            for seed, value in self.across_seeds(run, lambda tr: slice_figures(tr)["nonconvex_fraction"]).items():
                self.percent(f"{run}.seed.{seed}.nonconvex_fraction", value)
        config = self.traces[runs[0]].run_config

        # 1. Title and what a slice is.
        title = self.title("title")
        setup = self.text("setup", size=SIZE_SMALL, color=PALETTE["muted"],
                          steps=self.number("steps", config.steps, 6),
                          examples=self.number("eval_examples", config.eval_examples, 6),
                          grid=self.number("grid", config.grid, 6))
        setup.next_to(title, DOWN, buff=0.12)
        self.narrate("n_intro", 3)
        self.play(FadeIn(title), FadeIn(setup), run_time=1.2)
        self.narrate("n_setup", 3, examples=self.number("eval_examples", config.eval_examples, 6))

        # 2. One map of the log loss per net, with contour lines and the trained weights at the centre. The words
        # under the slices are made first, and the slices take the height they leave: a language longer than English
        # wraps them onto more lines (the slices' tops stay below the headers).
        logs = {run: _log_loss(self.traces[run]["loss_grid"]) for run in runs}
        finite = np.concatenate([v[np.isfinite(v)] for v in logs.values()] or [np.zeros(1)])
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        decade_step = 0.5 if high - low <= 6 else 1.0 if high - low <= 12 else 2.0
        levels = np.arange(math.ceil(low / decade_step) * decade_step, high, decade_step)
        self.number("contour_decades", decade_step)
        row = _row_width(len(runs), PANEL)
        key = self.wrapped("loss_key", size=SIZE_SMALL, color=PALETTE["muted"], width=row,
                           step=self.number("contour_decades", decade_step))
        ratio_key = self.wrapped("ratio_key", size=SIZE_SMALL, color=PALETTE["muted"], width=row)
        verdict = self._verdict(depths, figures)
        side, stats, crowded = self._slice_side(runs, figures, max(key.height, ratio_key.height), verdict)
        panels, maps, lines, centres, gaps = VGroup(), {}, VGroup(), VGroup(), VGroup()
        for k, run in enumerate(runs):
            frame = _panel_frame(k, len(runs), side)
            panels.add(frame.set_z_index(1))
            scaled = (logs[run] - low) / (high - low or 1.0)
            maps[run] = _cell_map(scaled, frame, PALETTE["background"], PALETTE["grad"], PALETTE["warn"])
            lines.add(_contours(logs[run], levels, frame))
            centres.add(Dot(frame.get_center(), radius=0.05, color=PALETTE["text"]))
            gaps.add(*_gap_marks(logs[run], frame, f"{run}.loss_grid"))
        lines.set_z_index(2)
        centres.set_z_index(3)
        gaps.set_z_index(3)
        headers = VGroup()
        for d_index, depth in enumerate(depths):
            pair = VGroup(panels[2 * d_index], panels[2 * d_index + 1])
            headers.add(self.text("layers", size=SIZE_LABEL, depth=self.number(f"depth.{d_index}", depth, 6))
                        .next_to(pair, UP, buff=0.42))
            for arch, panel in zip(("plain", "residual"), pair):
                headers.add(self.text(f"{arch}_col", size=SIZE_SMALL, color=PALETTE[arch]).next_to(panel, UP, buff=0.08))
        key.next_to(panels, DOWN, buff=0.12)
        self.narrate("n_slice", 4)
        self.play(FadeIn(headers), FadeIn(panels), *[FadeIn(maps[run]) for run in runs], FadeIn(key), FadeIn(gaps),
                  run_time=1.5)
        self.narrate("n_maps", 4.5)
        self.play(Create(lines), FadeIn(centres), run_time=2.5)
        self.wait(1)

        # 3. Where each slice curves downward (Li et al., Fig. 7), and each slice's figures.
        ratio_maps = VGroup()
        for k, run in enumerate(runs):
            t = self.traces[run]
            coords = np.asarray(t["coords"], np.float64)
            step = float(coords[1] - coords[0]) if coords.size > 1 and np.isfinite(coords[:2]).all() else 1.0
            ratio = curvature_ratio(t["loss_grid"], step)
            inner = _inner_frame(panels[k], ratio.shape[0] + 2)
            ratio_maps.add(_cell_map(ratio, inner, PALETTE["identity"], PALETTE["warn"], PALETTE["muted"]))
        ratio_key.next_to(panels, DOWN, buff=0.12)
        figures_top = panels.get_bottom()[1] - _key_drop(max(key.height, ratio_key.height))
        for k, column in enumerate(stats):
            column.set_x(panels[k].get_x()).shift(UP * (figures_top - column.get_top()[1]))
        self.narrate("n_curv", 4)
        self.play(FadeOut(VGroup(*maps.values())), FadeIn(ratio_maps), FadeOut(key), FadeIn(ratio_key),
                  FadeIn(stats), run_time=1.5)
        self.wait(1)

        # 4. The verdict at the deepest depth on every seed, and what the shallowest and the untrained nets say. Where
        # it needs the room (a language longer than English), it takes the figures' place: they were on screen the
        # whole step before, and the verdict says again the fractions it compares.
        if crowded:
            self.above_citation(verdict.shift(UP * (figures_top - verdict.get_top()[1])), self._source)
        self.narrate("n_verdict", 3)
        self.play(FadeIn(verdict, shift=UP * 0.2), *([FadeOut(stats)] if crowded else []), run_time=1.2)
        # said, not shown (the legibility floor): how these nets compare with Li et al.'s
        if len(depths) > 1:
            self.narrate("n_li", 3)
        deep = depths[-1]
        plain = depth_run("plain", deep)
        error = float(self.traces[plain]["final_test_error"])
        if not is_missing(error) and error > UNTRAINED:
            self.narrate("untrained", 4, depth=deep, steps=self.number("steps", config.steps, 6),
                         pct=self.percent(f"{plain}.test_error", error))
        self.cite(self._source)
        self.wait(5)

    def _slice_side(self, runs: list[str], figures: Mapping[str, Mapping[str, float]], key_height: float,
                    verdict: VGroup) -> tuple[float, VGroup, bool]:
        """The slices' side (scene units, :data:`PANEL` where the words leave it), the figures under each slice
        wrapped to it, and whether the verdict must take the figures' place (at the bottom of the frame, above the
        citation, it would reach them). ``verdict`` is placed at the bottom; the figures, or the verdict in their
        place, end above the citation's room (scenes.kit.fit.citation_room)."""
        self.above_citation(verdict.to_edge(DOWN, buff=0.62).to_edge(LEFT, buff=EDGE_BUFF), self._source)
        drop = _key_drop(key_height)
        floor = citation_room(self._citation(self._source))[3]
        side, crowded = PANEL, False
        for _ in range(3):  # the figures wrap to the side they are under: three rounds settle it
            stats = VGroup(*[self._figures(run, figures, side) for run in runs])
            column = max(c.height for c in stats)
            crowded = verdict.get_top()[1] + MIN_GAP > SLICE_TOP - side - drop - column
            room = SLICE_TOP - drop - floor  # from the slices' top to the citation's room, less the key
            side = min(PANEL, max(PANEL / 2, room - max(column, verdict.height if crowded else 0.0)))
        return side, VGroup(*[self._figures(run, figures, side) for run in runs]), crowded

    def _figures(self, run: str, figures: Mapping[str, Mapping[str, float]], width: float) -> VGroup:
        """The figures under one slice, each wrapped to ``width`` (never shrunk below the legibility floor)."""
        pct = self.percent(f"{run}.nonconvex_fraction", figures[run]["nonconvex_fraction"], 2)
        minima = self.number(f"{run}.local_minima", figures[run]["local_minima"], 6)
        error = self.percent(f"{run}.test_error", float(self.traces[run]["final_test_error"]))
        return VGroup(self.wrapped("nonconvex", size=SIZE_SMALL, width=width, pct=pct),
                      self.wrapped("minima", size=SIZE_SMALL, width=width, m=minima),
                      self.wrapped("test_error", size=SIZE_SMALL, color=PALETTE["muted"], width=width, pct=error),
                      ).arrange(DOWN, aligned_edge=LEFT, buff=0.04)

    def _verdict(self, depths: list[int], figures: Mapping[str, Mapping[str, float]]) -> VGroup:
        """Li et al.'s claim at the deepest depth (on the first seed, with how many seeds agree), and what the
        shallowest slices say: lines, placed by the caller."""
        deep = depths[-1]
        plain, residual = depth_run("plain", deep), depth_run("residual", deep)
        verdicts = claim_by_seed(self.seed_traces, deep)
        n_true, n_all = self.seed_count("claim", verdicts.values())
        seeds = self.t("seed_of", k=self.number("claim.seeds", n_true, 6), n=self.number("claim.of", n_all, 6))
        first = verdicts.get(next(iter(self.seed_traces)))
        fractions = {run: self.percent(f"{run}.nonconvex_fraction", figures[run]["nonconvex_fraction"])
                     for run in figures}
        lines = [self.wrapped("no_verdict" if first is None else "holds" if first else "fails", size=SIZE_LABEL,
                              color=PALETTE["identity"], depth=deep, plain=fractions[plain],
                              residual=fractions[residual], seeds=seeds)]
        if len(depths) > 1:
            shallow = depths[0]
            sp, sr = depth_run("plain", shallow), depth_run("residual", shallow)
            nearly = all(figures[r]["nonconvex_fraction"] <= MARGIN for r in (sp, sr)
                         if not is_missing(figures[r]["nonconvex_fraction"]))
            lines.append(self.wrapped("shallow_agrees" if nearly else "shallow_also", size=SIZE_SMALL,
                                      depth=shallow, plain=fractions[sp], residual=fractions[sr]))
        return VGroup(*lines).arrange(DOWN, aligned_edge=LEFT, buff=0.08)


def _key_drop(key_height: float) -> float:
    """From the slices' bottom down to the figures' top (scene units): the key below the slices (0.12 under them,
    ``key_height`` tall: the taller of the two keys) and 0.08 more; 0.45 at least (one line of key)."""
    return max(0.45, 0.2 + key_height)


def _log_loss(loss: Any) -> np.ndarray:
    """log10 of a loss grid, float64; NaN where the loss is missing, not finite or not positive."""
    f = np.asarray(loss, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log10(f)
    return np.where(np.isfinite(out), out, np.nan)


def _row_width(count: int, side: float) -> float:
    """The width of a row of ``count`` panels of ``side``, pairs (plain, residual) of one depth set closer."""
    pairs = count // 2
    return count * side + pairs * INNER_GAP + (pairs - 1) * PAIR_GAP


def _panel_frame(k: int, count: int, side: float = PANEL) -> VMobject:
    """The outline of panel ``k`` of ``count`` (side ``side``, top at :data:`SLICE_TOP`) in one row."""
    x = -_row_width(count, side) / 2 + side / 2 + k * side + (k // 2) * (INNER_GAP + PAIR_GAP) + (k % 2) * INNER_GAP
    return Square(side_length=side, color=PALETTE["muted"], stroke_width=1.5).move_to([x, SLICE_TOP - side / 2, 0])


def _inner_frame(frame: VMobject, grid: int) -> VMobject:
    """The part of ``frame`` the interior points of a ``grid`` x ``grid`` slice cover (one cell in from each side)."""
    inner = frame.copy().scale((grid - 2) / grid)
    return inner.move_to(frame.get_center())


def _contours(log_loss: np.ndarray, levels: np.ndarray, frame: VMobject) -> VGroup:
    """Contour lines of ``log_loss`` [G, G] at ``levels`` (contourpy, on the grid's own cells), in ``frame``."""
    import contourpy

    out = VGroup()
    grid = log_loss.shape[0]
    if grid < 2 or not np.isfinite(log_loss).any():
        return out
    axis = np.linspace(-1.0, 1.0, grid)
    gen = contourpy.contour_generator(axis, axis, np.ma.masked_invalid(log_loss.T))
    centre, half = frame.get_center(), frame.width / 2
    for level in levels:
        for line in gen.lines(float(level)):
            if len(line) < 2:
                continue
            points = [centre + np.array([x * half, y * half, 0.0]) for x, y in line]
            out.add(VMobject(stroke_color=PALETTE["text"], stroke_width=1.2, stroke_opacity=0.7)
                    .set_points_as_corners(points))
    return out


def _gap_marks(log_loss: np.ndarray, frame: VMobject, what: str) -> list[GapMark]:
    """One labelled gap over the bounding box of the grid points whose loss is missing (none if all are there)."""
    missing = np.argwhere(np.isnan(log_loss))
    if not len(missing):
        return []
    grid = log_loss.shape[0]
    cell = frame.width / grid
    (i0, j0), (i1, j1) = missing.min(0), missing.max(0)
    mark = GapMark((i1 - i0 + 1) * cell, (j1 - j0 + 1) * cell, what=f"{what}[{i0}..{i1}, {j0}..{j1}]")
    corner = frame.get_corner(DOWN + LEFT)
    return [mark.move_to(corner + np.array([(i0 + i1 + 1) / 2 * cell, (j0 + j1 + 1) / 2 * cell, 0.0]))]
