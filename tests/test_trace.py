"""Trace files: exact round trip, clear errors, never a pickle."""

from __future__ import annotations

import numpy as np
import pytest

from simulation.trace import SCHEMA_VERSION, Trace, TraceError


def _trace() -> Trace:
    rng = np.random.default_rng(0)
    return Trace(meta={"config": {"depth": 3}, "digest": "abc", "diverged": False},
                 arrays={"grad_norm": rng.random((5, 3)), "step": np.arange(5),
                         "tiny": np.array([0.0, 1e-310, np.nan, np.inf], dtype=np.float64),
                         "loss": rng.random(5).astype(np.float32)})


def test_round_trip_is_exact(tmp_path):
    original = _trace()
    loaded = Trace.load(original.save(tmp_path / "t.npz"))
    assert loaded.meta == {"schema": SCHEMA_VERSION, **original.meta}
    assert set(loaded.arrays) == set(original.arrays)
    for key, value in original.arrays.items():
        assert loaded[key].dtype == value.dtype
        np.testing.assert_array_equal(loaded[key], value)  # NaN == NaN here, bit for bit otherwise


def test_missing_truncated_and_garbage_files(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        Trace.load(tmp_path / "nope.npz")
    path = _trace().save(tmp_path / "t.npz")
    data = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="corrupt or truncated"):
        Trace.load(tmp_path / "cut.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip at all")
    with pytest.raises(TraceError, match="corrupt or truncated"):
        Trace.load(tmp_path / "junk.npz")


def test_old_schema_and_foreign_npz_are_refused(tmp_path):
    np.savez(tmp_path / "old.npz", __meta__=np.array('{"schema": 0}'), step=np.arange(3))
    with pytest.raises(TraceError, match="schema version 0"):
        Trace.load(tmp_path / "old.npz")
    np.savez(tmp_path / "foreign.npz", step=np.arange(3))
    with pytest.raises(TraceError, match="no metadata"):
        Trace.load(tmp_path / "foreign.npz")


def test_object_arrays_are_refused_and_pickles_never_loaded(tmp_path):
    with pytest.raises(TraceError, match="pickle"):
        Trace(meta={}, arrays={"bad": np.array([{"a": 1}], dtype=object)}).save(tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()
    np.savez(tmp_path / "evil.npz", __meta__=np.array('{"schema": 1}'),
             payload=np.array([{"a": 1}], dtype=object))
    with pytest.raises(TraceError, match="corrupt or truncated"):
        Trace.load(tmp_path / "evil.npz").arrays  # allow_pickle=False refuses the object array


def test_failed_save_leaves_no_file(tmp_path, monkeypatch):
    def explode(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", explode)
    with pytest.raises(KeyboardInterrupt):
        _trace().save(tmp_path / "t.npz")
    assert list(tmp_path.iterdir()) == []
