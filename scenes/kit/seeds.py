"""Seeds on screen: a scene mixin that shows one experiment's runs for several seeds, and spread helpers.

Example::

    python render.py render ChainRuleProduct --set seeds=0,1,2,3,4

:class:`SeedSpread` goes before :class:`~scenes.kit.base.LectureScene` in a scene's bases. The experiment's
``seeds`` parameter (runs keyed ``RunKey(name, seed)``, :mod:`simulation.runkeys`) decides the seeds; its default
here (``experiment_defaults``) is three seeds, so the default lecture shows a spread while staying fast. After ``setup`` the scene has ``self.seed_traces``: ``{seed: {NAME: Trace}}`` in the
order of ``seeds``, and ``self.traces`` is the first seed's ``{NAME: Trace}``, so the code that draws one
run set is unchanged. A variant with ``trace_files`` (tests) gives the other seeds' files under their
``RunKey(name, seed)`` keys. The scene draws the spread and says "n of N seeds"; the numbers JSON keeps every
seed's value (keys ``...seed.<k>...``) and lists the seeds under ``"seeds"``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["SeedSpread", "count_true", "seed_range", "bar_seed_dots", "with_seed_count"]


class SeedSpread:
    """Mixin for a :class:`~scenes.kit.base.LectureScene`: ``self.seed_traces`` for every seed shown."""

    experiment_defaults = {"seeds": (0, 1, 2)}  # the experiment's seeds unless --set seeds=... says otherwise

    def setup(self) -> None:
        if not self.experiment:
            raise ValueError(f"{type(self).__name__}: seeds need an experiment")
        super().setup()  # self.seed_traces: {seed: {name: Trace}}, self.traces: the first seed's
        self.numbers["seeds"] = list(self.seed_traces)

    def across_seeds(self, run: str, value) -> dict[int, float]:
        """``{seed: value(trace)}`` of run ``run`` in every seed that has it (``value``: Trace -> float)."""
        return {seed: float(value(traces[run])) for seed, traces in self.seed_traces.items() if run in traces}

    def across_seeds_array(self, run: str, value) -> dict[int, np.ndarray]:
        """``{seed: value(trace)}`` of run ``run`` in every seed that has it (``value``: Trace -> float64 array)."""
        return {seed: np.asarray(value(traces[run]), dtype=np.float64) for seed, traces in self.seed_traces.items()
                if run in traces}

    def other_seeds(self) -> list[int]:
        """The seeds drawn as a spread: every seed but the first (whose run is drawn in full)."""
        return list(self.seed_traces)[1:]

    def seed_count(self, key: str, verdicts: Iterable[bool | None]) -> tuple[int, int]:
        """"k of n seeds" of a claim: ``verdicts`` one per seed, None where a value it needs is missing
        (that seed is not counted). Records ``<key>.seeds`` (k) and ``<key>.of`` (n)."""
        k, n = count_true(v for v in verdicts if v is not None)
        self.number(f"{key}.seeds", k)
        self.number(f"{key}.of", n)
        return k, n


def count_true(flags: Iterable[bool]) -> tuple[int, int]:
    """(how many of ``flags`` hold, how many there are): the "n of N seeds" of a claim."""
    flags = [bool(f) for f in flags]
    return sum(flags), len(flags)


def seed_range(values: Iterable[float]) -> tuple[float, float, float]:
    """(lowest, median, highest) of the finite ``values``; NaN three times when none is finite."""
    arr = np.asarray([v for v in values], dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return float("nan"), float("nan"), float("nan")
    return float(arr.min()), float(np.median(arr)), float(arr.max())


def with_seed_count(scene, text: str, k: int, n: int) -> str:
    """``text`` followed by "(k of n seeds)" in the scene's language (its catalog's ``SeedSpread.with_count``:
    full-width brackets in Chinese)."""
    count = scene.t("seed_of", k=k, n=n)
    return scene.t("with_count", text=text, count=count)


def bar_seed_dots(bars, series: int, by_seed: dict[int, np.ndarray], radius: float = 0.045):
    """A dot per seed on the bars of ``bars`` (a :class:`scenes.kit.widgets.GroupedBars`): for each seed's
    values [n] of series ``series``, a dot at the x of bar i and the height of its value (clipped to the
    chart's top). A missing (NaN) value gets no dot: the seed's numbers JSON entry says it is missing."""
    from manim import Dot, VGroup

    from scenes.kit.style import PALETTE

    chart = bars.chart
    top = chart.axes.y_range[1]
    dots = VGroup()
    for values in by_seed.values():
        for bar, value in zip(bars.bars[series], np.asarray(values, dtype=np.float64)):
            if np.isnan(value):
                continue
            y = chart.point(0, float(np.clip(value, 0.0, top)))[1]
            dots.add(Dot([bar.get_center()[0], y, 0], radius=radius, color=PALETTE["text"],
                         stroke_width=1.5, stroke_color=PALETTE["background"]))
    return dots
