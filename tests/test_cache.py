"""The trace cache: keyed by the config digest; a second run trains nothing."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import simulation.kinds.mlp
from simulation.cache import get_trace, get_traces, trace_path
from simulation.config import ConfigError, RunConfig

TINY = RunConfig(depth=3, width=8, steps=12, record_every=4)


def test_second_run_trains_nothing(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="simulation")
    first = get_trace(TINY)
    assert trace_path(TINY).is_file()
    assert "training" in caplog.text

    def forbidden(*args, **kwargs):
        raise AssertionError("a cached config was trained again")

    monkeypatch.setattr(simulation.kinds.mlp, "run", forbidden)
    caplog.clear()
    second = get_trace(TINY)
    assert "cache hit" in caplog.text and "nothing trained" in caplog.text
    for key in first.arrays:
        np.testing.assert_array_equal(first[key], second[key])


def test_digest_covers_every_field():
    base = RunConfig()
    changed = {"arch": "residual", "depth": 11, "width": 33, "activation": "tanh", "norm": "batchnorm",
               "steps": 301, "batch_size": 65, "lr": 0.051, "optimizer": "adam", "momentum": 0.8,
               "init_gain": 1.1, "record_every": 11, "seed": 1, "stages": 2, "shortcut": "zero_pad",
               "weight_decay": 1e-4, "dataset": "bands", "model": "conv", "shortcut_scale": 0.5,
               "gate": "exclusive", "gate_bias": -6.0, "residual_init": "rezero", "lesion": True,
               "input_sweep": True}
    assert set(changed) == set(RunConfig.field_types()), "a new RunConfig field needs a line here"
    extra = {"model": {"depth": 20}, **dict.fromkeys(("shortcut_scale", "gate", "residual_init"), {"arch": "residual"})}
    digests = {base.replace(**{k: v}, **extra.get(k, {})).digest() for k, v in changed.items()}
    assert len(digests) == len(changed) and base.digest() not in digests
    assert RunConfig().digest() == base.digest()  # stable


def test_corrupt_cache_entry_is_trained_again(caplog):
    caplog.set_level(logging.INFO, logger="simulation")
    path = trace_path(TINY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"garbage")
    trace = get_trace(TINY)
    assert "ignoring cached trace" in caplog.text
    assert trace["grad_norm"].shape == (4, 3)


def test_same_config_gives_bit_identical_trace():
    a = simulation.kinds.mlp.run(TINY)
    b = simulation.kinds.mlp.run(TINY)
    assert a.meta == b.meta
    for key in a.arrays:
        assert a[key].tobytes() == b[key].tobytes(), key


@pytest.mark.parametrize("bad", [{"depth": 0}, {"lr": -1.0}, {"lr": float("nan")}, {"width": 10**7},
                                 {"arch": "dense"}, {"activation": "swish"}, {"steps": 0}])
def test_bad_configs_cannot_be_built(bad):
    # A config refuses itself when it is made (replace validates), so get_traces only ever sees valid ones;
    # that the command line trains nothing on bad input is tests/test_cli.py's BAD_INPUTS.
    with pytest.raises(ConfigError):
        RunConfig().replace(**bad)
