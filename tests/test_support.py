"""The claim tests' shared trace cache (tests/support.py: shared_traces): a run two claims need is trained once per
session, also when the other xdist worker is training it right now. Tiny runs: well under a second each."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from filelock import FileLock

import support
from simulation import cache
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey

TINY = {"steps": 20, "depth": 3}


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """An empty shared cache and a process that has read nothing from it yet."""
    monkeypatch.setenv(support.SHARED_CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(support, "_TRACES", {})
    return tmp_path


def no_training(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(cache, "run_sweep", refuse)
    monkeypatch.setattr(cache, "train", refuse)


def test_a_run_two_claims_share_is_trained_once(shared, monkeypatch, isolated_cache):
    first = support.cached_traces("chain_rule", **TINY, seeds="0,1")
    digests = {c.digest() for c in build_runs("chain_rule", {**TINY, "seeds": "0,1"}).values()}
    assert {p.stem for p in shared.glob("*.npz")} == digests  # stored in the shared cache ...
    assert not list(isolated_cache.glob("*.npz"))  # ... not in the test's own
    monkeypatch.setattr(support, "_TRACES", {})  # another process (the other xdist worker, CI's slow run)
    no_training(monkeypatch)
    again = support.trained_at_seed("chain_rule", 1, **TINY)
    assert set(again) == {"plain", "residual"}
    for name, trace in again.items():
        assert np.array_equal(trace["grad_norm"], first[RunKey(name, 1)]["grad_norm"])


def test_a_run_the_other_worker_is_training_is_waited_for_not_trained_again(shared, monkeypatch):
    config = next(iter(build_runs("chain_rule", {**TINY, "seed": 0}).values()))
    digest = config.digest()
    other = FileLock(str(shared / f"{digest}.lock"))
    other.acquire()  # the other worker holds the run's lock: it is training it
    result = {}
    reader = threading.Thread(target=lambda: result.update(traces=support.shared_traces([config])))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive() and not result, "did not wait for the run being trained elsewhere"
    monkeypatch.setenv("RESIDUAL_CACHE", str(shared))
    trained = cache.get_trace(config, progress=False)  # what the other worker stores before it lets go
    no_training(monkeypatch)
    other.release()
    reader.join(60)
    assert not reader.is_alive()
    assert np.array_equal(result["traces"][0]["grad_norm"], trained["grad_norm"])
