"""Seeds on screen: a scene mixin that shows one experiment's runs for several seeds, and spread helpers.

Example::

    python render.py render ChainRuleProduct --set seeds=0,1,2,3,4

:class:`SeedSpread` goes before :class:`~scenes.base.LectureScene` in a scene's bases. The experiment's
``seeds`` parameter (docs/sweep.md: run keys ``NAME`` for the first seed, ``NAME@seed{s}`` for the others)
decides the seeds; its default here (``experiment_defaults``) is three seeds, so the default lecture
shows a spread while staying fast. After ``setup`` the scene has ``self.seed_traces``: ``{seed: {NAME: Trace}}`` in the
order of ``seeds``, and ``self.traces`` is the first seed's ``{NAME: Trace}``, so the code that draws one
run set is unchanged. A variant with ``trace_files`` (tests) gives the other seeds' files under their
``NAME@seed{s}`` keys. The scene draws the spread and says "n of N seeds"; the numbers JSON keeps every
seed's value (keys ``...seed.<k>...``) and lists the seeds under ``"seeds"``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from simulation.seeds import group_by_seed

__all__ = ["SeedSpread", "count_true", "seed_range"]


class SeedSpread:
    """Mixin for a :class:`~scenes.base.LectureScene`: ``self.seed_traces`` for every seed shown."""

    experiment_defaults = {"seeds": "0,1,2"}  # the experiment's seeds unless --set seeds=... says otherwise

    def setup(self) -> None:
        if not self.experiment:
            raise ValueError(f"{type(self).__name__}: seeds need an experiment")
        super().setup()
        by_seed: dict[int, dict] = {}
        for name, traces in group_by_seed(self.traces).items():
            for seed, trace in traces.items():
                by_seed.setdefault(seed, {})[name] = trace
        first = next(iter(by_seed))  # the seed of the bare run keys: the first of ``seeds``
        self.seed_traces = by_seed
        self.traces = dict(by_seed[first])
        self.numbers["seeds"] = list(by_seed)

    def across_seeds(self, run: str, value) -> dict[int, float]:
        """``{seed: value(trace)}`` of run ``run`` in every seed that has it (``value``: Trace -> float)."""
        return {seed: float(value(traces[run])) for seed, traces in self.seed_traces.items() if run in traces}


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
