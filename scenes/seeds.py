"""Seeds on screen: a scene mixin that loads one experiment's runs for several seeds, and spread helpers.

Example::

    python render.py render ChainRuleProduct --set ChainRuleProduct.seeds=0,1,2,3,4

:class:`SeedSpread` goes before :class:`~scenes.base.LectureScene` in a scene's bases. After ``setup``
the scene has ``self.seed_traces``: ``{seed: {run_name: Trace}}`` for every seed of ``seeds`` (the runs of
its experiment with the config field ``seed`` set; missing ones are trained in a subprocess, like the
base's), while ``self.traces`` stays the one run set the rest of the scene draws. A variant with
``trace_files`` (tests) reads ``seed_trace_files`` (``{seed: {run_name: path}}``) instead, plus the seed
of its ``trace_files``. The scene draws the spread and says "n of N seeds"; the numbers JSON keeps
every seed's value (keys ``...seed.<k>...``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from simulation.cache import get_traces
from simulation.experiments import build_runs
from simulation.trace import Trace

__all__ = ["SeedSpread", "count_true", "seed_range"]


class SeedSpread:
    """Mixin for a :class:`~scenes.base.LectureScene`: ``self.seed_traces`` for every seed of ``seeds``."""

    seeds: tuple[int, ...] = (0, 1, 2)  # seeds whose runs the scene shows side by side
    seed_trace_files: dict[int, dict[str, str]] | None = None  # seed -> run name -> .npz path (tests)

    def setup(self) -> None:
        super().setup()
        if not self.experiment:
            raise ValueError(f"{type(self).__name__}: seeds need an experiment")
        seeds = list(dict.fromkeys(int(s) for s in self.seeds))
        if not seeds:
            raise ValueError(f"{type(self).__name__}: seeds must name at least one seed")
        if self.trace_files is not None:
            found = {_seed_of(self.traces): self.traces}
            for seed, files in (self.seed_trace_files or {}).items():
                found[int(seed)] = {name: Trace.load(path) for name, path in files.items() if self.wants_run(name)}
            self.seed_traces = dict(sorted(found.items()))
        else:
            wanted = {}
            for seed in seeds:
                runs = build_runs(self.experiment, {**self.params, "seed": str(seed)})
                wanted[seed] = {name: config for name, config in runs.items() if self.wants_run(name)}
            configs = [config for runs in wanted.values() for config in runs.values()]
            loaded = dict(zip(configs, get_traces(configs, in_subprocess=True, log_hits=False)))
            self.seed_traces = {seed: {name: loaded[config] for name, config in runs.items()}
                                for seed, runs in wanted.items()}
        self.numbers["seeds"] = sorted(self.seed_traces)
        self.numbers["seed_traces"] = {str(seed): {name: t.meta["digest"] for name, t in traces.items()}
                                       for seed, traces in self.seed_traces.items()}

    def wants_run(self, name: str) -> bool:
        """Whether the seed runs include run ``name`` (a scene that draws a few of its experiment's runs
        overrides this, so other seeds train only those)."""
        return True

    def across_seeds(self, run: str, value: Callable[[Trace], float]) -> dict[int, float]:
        """``{seed: value(trace)}`` of run ``run`` in every seed that has it."""
        return {seed: float(value(traces[run])) for seed, traces in self.seed_traces.items() if run in traces}


def _seed_of(traces: dict[str, Trace]) -> int:
    seeds = {int(t.config.get("seed", 0)) for t in traces.values()}
    if len(seeds) != 1:
        raise ValueError(f"one run set must share one seed; got seeds {sorted(seeds)}")
    return seeds.pop()


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
