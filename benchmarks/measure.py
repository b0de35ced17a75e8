"""Measuring on a shared, noisy machine: interleaved paired runs, median ratio, interquartile range, repeats.

Example::

    from benchmarks.measure import Target, compare
    figures = compare({"bare": bare, "recorded": recorded}, baseline="bare",
                      targets={"recorded": Target("<=", 1.05)})
    print(figures["recorded"].row("recorder overhead, MLP"))

Every variant is a callable that runs once and returns its cost (seconds, or any positive number). One
*round* runs every variant once, in an order rotated by one each round (AB, BA, AB, ... for two), after
``warmup`` discarded rounds; the figure of a variant is the median over rounds of its cost divided by the
baseline's cost *of the same round*, so that load from other programs, which comes and goes over seconds,
falls on both sides of each ratio alike. The spread is the interquartile range (25th to 75th percentile,
``statistics.quantiles(method="inclusive")``) of those ratios.

Adaptive rule: after ``min_rounds`` rounds, stop as soon as every judged variant's interquartile range lies
wholly on one side of its target (the verdict no longer hangs on the noise), else add rounds up to
``max_rounds``. A figure whose range still straddles the target at the cap is marked ``undecided``; its
verdict still follows the median.
"""

from __future__ import annotations

from pathlib import Path

import math
import operator
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Target", "Figure", "quartiles", "compare", "repeat", "format_table", "load", "video_seconds"]

_OPS = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Target:
    """``value OP bound``, e.g. ``Target("<=", 1.05)`` for an overhead ratio, ``Target(">=", 1.5)`` for a
    throughput."""

    op: str
    bound: float

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"target operator must be one of {sorted(_OPS)}, not {self.op!r}")

    def met(self, value: float) -> bool:
        return bool(_OPS[self.op](value, self.bound))

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}"


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile) of ``values``; one value gives it three times."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("no values")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def load() -> float:
    """The machine's 1-minute load average (what ``uptime`` prints first)."""
    return os.getloadavg()[0]


@dataclass
class Figure:
    """One measured figure: the samples (ratios or raw values), their quartiles, the target and verdict."""

    samples: list[float]
    target: Target | None = None
    unit: str = ""
    loads: list[float] = field(default_factory=list)  # load average when each sample was taken
    note: str = ""

    @property
    def median(self) -> float:
        return quartiles(self.samples)[1]

    @property
    def iqr(self) -> tuple[float, float]:
        q1, _, q3 = quartiles(self.samples)
        return q1, q3

    @property
    def repeats(self) -> int:
        return len(self.samples)

    @property
    def passed(self) -> bool | None:
        """Whether the median meets the target (None without a target or without finite samples)."""
        if self.target is None or not self.samples or not math.isfinite(self.median):
            return None
        return self.target.met(self.median)

    @property
    def decided(self) -> bool:
        """Whether the whole interquartile range lies on the same side of the target as the median."""
        if self.target is None:
            return True
        q1, q3 = self.iqr
        return self.target.met(q1) == self.target.met(q3)

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "-"
        return ("pass" if self.passed else "FAIL") + ("" if self.decided else " (undecided)")


def _decided(samples: list[float], target: Target) -> bool:
    return Figure(samples, target).decided


def compare(variants: dict[str, Callable[[], float]], baseline: str, targets: dict[str, Target] | None = None,
            min_rounds: int = 5, max_rounds: int = 25, warmup: int = 1, unit: str = "x") -> dict[str, Figure]:
    """Interleaved rounds of every variant; returns ``{variant: Figure of cost / baseline cost}`` for every
    variant but the baseline, plus the baseline's raw costs under its own name. A variant may return a dict
    ``{series: cost}`` instead of one cost: several figures from one run (e.g. with and without a part).

    ``targets`` names the judged variants (the adaptive rule waits for them only). Raises ValueError for an
    unknown baseline or target name, or ``min_rounds`` > ``max_rounds``."""
    targets = targets or {}
    names = list(variants)
    if baseline not in variants:
        raise ValueError(f"baseline {baseline!r} must name one of the variants {names}")
    if not 1 <= min_rounds <= max_rounds:
        raise ValueError(f"need 1 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}")
    costs: dict[str, list[float]] = {}  # series -> cost per round (a variant returning a dict adds several)
    loads: list[float] = []
    for index in range(warmup + max_rounds):
        shift = index % len(names)
        order = names[shift:] + names[:shift]  # rotate who goes first
        round_costs: dict[str, float] = {}
        for name in order:
            result = variants[name]()
            round_costs.update(result if isinstance(result, dict) else {name: result})
        if index < warmup:
            continue
        loads.append(load())
        for name, cost in round_costs.items():
            costs.setdefault(name, []).append(float(cost))
        done = len(loads)
        if index == warmup and not set(targets) <= set(costs) - {baseline}:
            raise ValueError(f"targets {sorted(targets)} must name series of {sorted(costs)} other than {baseline!r}")
        ratios = {name: [c / b for c, b in zip(costs.get(name, []), costs[baseline])] for name in targets}
        if done >= min_rounds and all(_decided(ratios[n], t) for n, t in targets.items()):
            break
    figures = {baseline: Figure(costs[baseline], None, "s", loads)}
    for name in costs:
        if name != baseline:
            figures[name] = Figure([c / b for c, b in zip(costs[name], costs[baseline])], targets.get(name), unit,
                                   loads)
    return figures


def repeat(measure: Callable[[], float], target: Target | None = None, min_repeats: int = 3, max_repeats: int = 10,
           warmup: int = 0, unit: str = "") -> Figure:
    """Run ``measure`` (which returns one value) until its interquartile range lies on one side of
    ``target`` (at least ``min_repeats``, at most ``max_repeats`` times) after ``warmup`` discarded runs."""
    if not 1 <= min_repeats <= max_repeats:
        raise ValueError(f"need 1 <= min_repeats <= max_repeats, got {min_repeats}, {max_repeats}")
    samples: list[float] = []
    loads: list[float] = []
    for index in range(warmup + max_repeats):
        value = float(measure())
        if index < warmup:
            continue
        samples.append(value)
        loads.append(load())
        if len(samples) >= min_repeats and (target is None or _decided(samples, target)):
            break
    return Figure(samples, target, unit, loads)


def _number(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return text + ("" if unit in ("", "x") else f" {unit}")


_SECONDS = {"s": 1.0, "ms": 1e-3}  # units of time, given also in yardsticks
COLUMNS = ("metric", "target", "median", "spread (IQR)", "repeats", "pass/fail", "load")


def format_table(rows: list[tuple[str, Figure | str]], yardstick=None) -> str:
    """A plain-text table, one row per ``(metric, Figure)``; a string in place of the figure is a row that
    was not measured (the string says why, e.g. "skipped: pass --include-hq"). With ``yardstick`` (a
    ``benchmarks.yardstick.Yardstick`` measured in the same run) the table opens with its line and every
    figure in seconds or milliseconds is also given in yardsticks (median / yardstick, column "yardsticks")."""
    columns = COLUMNS + (("yardsticks",) if yardstick is not None else ())
    lines = []
    for metric, fig in rows:
        if isinstance(fig, str):
            lines.append((metric, "", "", "", "", fig, "") + (("",) if yardstick is not None else ()))
            continue
        q1, q3 = fig.iqr
        target = "" if fig.target is None else f"{fig.target}" + ("" if fig.unit in ("", "x") else f" {fig.unit}")
        spread = f"{_number(q1, '')}-{_number(q3, fig.unit)}"
        loads = f"{min(fig.loads):.1f}-{max(fig.loads):.1f}" if fig.loads else ""
        line = (metric, target, _number(fig.median, fig.unit), spread, str(fig.repeats), fig.verdict, loads)
        if yardstick is not None:
            seconds = fig.median * _SECONDS.get(fig.unit, math.nan)
            line += (f"{yardstick.of(seconds):.3g}" if math.isfinite(seconds) else "",)
        lines.append(line)
    widths = [max(len(str(r[i])) for r in [columns, *lines]) for i in range(len(columns))]
    out = [str(yardstick)] if yardstick is not None else []
    out.append(" | ".join(str(c).ljust(w) for c, w in zip(columns, widths)).rstrip())
    out.append("-+-".join("-" * w for w in widths))
    out += [" | ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines]
    return "\n".join(out)


def video_seconds(folder: Path) -> float:
    """Seconds of video of the scene clips under ``folder`` (any depth): each scene's ``.mp4`` once; its beats
    (``NAME.beat-NN.mp4``, sections of the same clip) and a joined ``lecture.mp4`` are not counted again."""
    import av

    total = 0.0
    for clip in sorted(Path(folder).rglob("*.mp4")):
        if ".beat-" in clip.name or clip.name.startswith("lecture"):
            continue
        with av.open(str(clip)) as container:
            total += container.duration / av.time_base
    return total
