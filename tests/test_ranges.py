"""Every parameter has a range or a set of choices, checked when a config is made: before any work."""

from __future__ import annotations

import dataclasses
import math

import pytest

from simulation.config import ConfigError, HighwayConfig, Range, RunConfig, TransformerConfig, param_range
from simulation.experiments import EXPERIMENTS
from cli.params import build_runs  # parses string values as --set does

from data.make_traces import user_like_trace_files

FIELDS = [(cls, f.name) for cls in (RunConfig, TransformerConfig, HighwayConfig) for f in dataclasses.fields(cls)]


def _outside(r: Range) -> list[float]:
    """Values just outside ``r``, and the hostile ones."""
    is_int = isinstance(r.low, int) and not r.open_low
    low = r.low if r.open_low else r.low - (1 if is_int else 1e-9 * max(1, abs(r.low)))
    values = [low, r.high + 1, 10**30 if is_int else math.inf]
    return values + ([] if is_int else [math.nan, -math.inf])


@pytest.mark.parametrize("cls, name", FIELDS, ids=[f"{c.__name__}.{n}" for c, n in FIELDS])
def test_every_field_has_a_range_or_choices_and_values_outside_are_refused(cls, name):
    allowed = param_range(cls, name)
    assert allowed is not None, f"{cls.__name__}.{name} has neither a range nor choices"
    bad = ["no-such-choice", ""] if isinstance(allowed, tuple) else _outside(allowed)
    for value in bad:
        with pytest.raises(ConfigError, match=rf"^{name} must") as info:
            cls(**{name: value})
        assert "\n" not in str(info.value) and len(str(info.value)) < 300


# Fields also checked against others: the ends are tried with the others set so that only the range decides.
PARTNERS = {(RunConfig, "stages"): {"depth": 1000, "width": 1}, (TransformerConfig, "heads"): {"width": 4096},
            (RunConfig, "model"): {"depth": 20},  # a conv net has 6n + 2 layers
            (TransformerConfig, "width"): {"heads": 2},
            **{(RunConfig, name): {"arch": "residual"} for name in ("shortcut_scale", "gate", "residual_init")}}
# Ends the cross-field checks refuse on their own: width * 2**(stages - 1) <= 4096, momentum < 1.
SUBSTITUTES = {(RunConfig, "stages", 1000): 12, (RunConfig, "momentum", 1.0): 0.999,
               (HighwayConfig, "momentum", 1.0): 0.999}


@pytest.mark.parametrize("cls, name", FIELDS, ids=[f"{c.__name__}.{n}" for c, n in FIELDS])
def test_the_ends_of_a_range_and_every_choice_are_accepted(cls, name):
    allowed = param_range(cls, name)
    values = list(allowed) if isinstance(allowed, tuple) else [allowed.high] + [allowed.low] * (not allowed.open_low)
    for value in values:
        value = SUBSTITUTES.get((cls, name, value), value)
        assert getattr(cls(**{**PARTNERS.get((cls, name), {}), name: value}), name) == value


def test_seed_minus_one_is_refused_with_one_line():
    with pytest.raises(ConfigError, match="^seed must be between 0 and 2147483647; got -1$"):
        build_runs("vanishing", {"seed": "-1"})


PATH_PARTNERS = {"twin": {"trace": user_like_trace_files("gpt2_24")["residual"]}}  # --twin only beside --trace


@pytest.mark.parametrize("name", [n for n in EXPERIMENTS if EXPERIMENTS[n].extra_defaults])
def test_every_experiment_parameter_has_a_range_or_choices(name):
    params_type = EXPERIMENTS[name].params_type
    for f in dataclasses.fields(params_type):
        if "file" in f.metadata:  # a path (--trace FILE): a file that is not there is refused in one line
            with pytest.raises(ConfigError, match=f"^--{f.name}: trace '.*' does not exist$"):
                build_runs(name, {**PATH_PARTNERS.get(f.name, {}), f.name: "no-such-file.npz"})
            continue
        assert "range" in f.metadata or "choices" in f.metadata, f"{name}.{f.name}"
        bad = "no-such-choice" if "choices" in f.metadata else "-1"
        with pytest.raises(ConfigError, match=f"^{f.name} must"):
            build_runs(name, {f.name: bad})
