"""Run keys: which run of an experiment a config or trace is, typed as (name, seed) (torch-free).

Example::

    python -c "from simulation.experiments import build_runs; print(list(build_runs('chain_rule', {'seeds': '0,1'})))"

:func:`simulation.experiments.build_runs` returns ``{RunKey: config}``; scenes, the command line and the
explorer keep the key typed. Where a key must be text (a scene's numbers JSON, ``render.py train --json``, a
render job, the explorer's data) it is written by :func:`key_texts` and read back by :func:`read_key_text`,
the only two functions that know the text form (docs/how-to/sweeps.md): ``NAME`` for a run of the first seed of an
experiment's ``seeds``, ``NAME@seed{s}`` for the others. No other code takes a run name apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["RunKey", "key_texts", "read_key_text", "by_seed", "by_name", "one_seed"]

V = TypeVar("V")

_SEED_MARK = "@seed"  # the text form's separator: f"{name}@seed{seed}"
_TEXT = re.compile(rf"(?P<name>[^@]+){_SEED_MARK}(?P<seed>\d+)")


@dataclass(frozen=True, order=True)
class RunKey:
    """One run of an experiment: its ``name`` there (``PLAIN``, ``depth_run("plain", 20)`` ...) and its ``seed``.
    Raises ValueError for an empty name or one with "@" (the text form's separator), or a seed that is not an
    int >= 0."""

    name: str  # the run's name in its experiment (simulation.experiments: PLAIN, sweep_run(...), ...)
    seed: int  # the seed it was trained with (its config's ``seed``)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "@" in self.name:
            raise ValueError(f"a run name is a non-empty string without '@'; got {self.name!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"a run's seed is an int >= 0; got {self.seed!r}")


def key_texts(keys: Iterable[RunKey]) -> dict[RunKey, str]:
    """The text form of each key, in order: the first key's seed is the first of the experiment's ``seeds``, whose
    runs are written by their bare ``name``; the other seeds' as ``name@seed{s}``. The one writer of run keys."""
    keys = list(keys)
    first = keys[0].seed if keys else None
    return {key: key.name if key.seed == first else f"{key.name}{_SEED_MARK}{key.seed}" for key in keys}


def read_key_text(text: str, first_seed: int) -> RunKey:
    """The :class:`RunKey` a text of :func:`key_texts` was written from: ``name@seed{s}`` -> (name, s), a bare
    ``name`` -> (name, ``first_seed``). The one reader of run keys. Raises ValueError for a text no key writes."""
    match = _TEXT.fullmatch(text)
    if match:
        return RunKey(match["name"], int(match["seed"]))
    return RunKey(text, first_seed)


def by_seed(runs: Mapping[RunKey, V]) -> dict[int, dict[str, V]]:
    """``{RunKey: value}`` -> ``{seed: {name: value}}``, seeds in the order their first key comes (build_runs
    orders them as ``seeds``)."""
    out: dict[int, dict[str, V]] = {}
    for key, value in runs.items():
        out.setdefault(key.seed, {})[key.name] = value
    return out


def by_name(runs: Mapping[RunKey, V]) -> dict[str, dict[int, V]]:
    """``{RunKey: value}`` -> ``{name: {seed: value}}``, names and seeds in the order the keys come."""
    out: dict[str, dict[int, V]] = {}
    for key, value in runs.items():
        out.setdefault(key.name, {})[key.seed] = value
    return out


def one_seed(runs: Mapping[RunKey, V]) -> dict[str, V]:
    """``{name: value}`` of runs that all have one seed (an experiment built without ``seeds``). Raises ValueError
    when they have several."""
    seeds = by_seed(runs)
    if len(seeds) > 1:
        raise ValueError(f"runs of {len(seeds)} seeds ({', '.join(map(str, seeds))}); pick one with by_seed")
    return next(iter(seeds.values()), {})

