"""Trace files: exact round trip, clear errors, never a pickle."""

from __future__ import annotations

import numpy as np
import pytest

from simulation.trace import SCHEMA_VERSION, Trace, TraceError, TraceMeta


def _trace() -> Trace:
    rng = np.random.default_rng(0)
    return Trace(meta={"config": {"depth": 3}, "digest": "abc", "diverged": False},
                 arrays={"grad_norm": rng.random((5, 3)), "step": np.arange(5),
                         "tiny": np.array([0.0, 1e-310, np.nan, np.inf], dtype=np.float64),
                         "loss": rng.random(5).astype(np.float32)})


def test_round_trip_is_exact(tmp_path):
    original = _trace()
    loaded = Trace.load(original.save(tmp_path / "t.npz"))
    assert loaded.meta == original.meta and loaded.meta.schema == SCHEMA_VERSION
    assert loaded.meta.diverged is False and loaded.meta.digest == "abc"
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


@pytest.mark.parametrize("steps", [np.arange(0), None], ids=["empty step array", "no step array"])
def test_a_trace_with_no_records_is_refused_with_one_line(tmp_path, steps):
    arrays = {"loss": np.zeros(0, np.float32)}
    if steps is not None:
        arrays["step"] = steps
    path = Trace(meta={"config": {"depth": 3}}, arrays=arrays).save(tmp_path / "empty.npz")
    with pytest.raises(TraceError, match="has no records") as info:
        Trace.load(path)
    assert "\n" not in str(info.value)


def test_metadata_is_typed_and_unknown_keys_are_refused(tmp_path):
    meta = TraceMeta(config={"depth": 2}, digest="d", diverged=True, diverged_step=3, diverged_layer=-1)
    assert meta.diverged_pass is None and meta.diverged_step == 3
    with pytest.raises(TypeError):  # attributes only: the mapping shim is gone
        meta["diverged"]
    assert not hasattr(meta, "get") and not hasattr(Trace, "config")
    with pytest.raises(TraceError, match="unknown key"):
        Trace(meta={"config": {}, "surprise": 1}, arrays={"step": np.arange(2)})
    np.savez(tmp_path / "odd.npz", __meta__=np.array(f'{{"schema": {SCHEMA_VERSION}, "surprise": 1}}'),
             step=np.arange(3))
    with pytest.raises(TraceError, match="unknown key"):
        Trace.load(tmp_path / "odd.npz")


def test_run_config_is_the_typed_config_of_every_committed_trace():
    from pathlib import Path

    from simulation.runs import KINDS

    kinds = {name: kind.config for name, kind in KINDS.items()}  # the one table of run kinds
    paths = sorted((Path(__file__).parent / "data").rglob("*.npz"))
    seen = set()
    for path in paths:
        trace = Trace.load(path)
        config = trace.run_config
        typed = config.to_dict()  # fields added since the trace was written take their defaults
        written = trace.meta.config  # the JSON the file holds
        assert type(config) is kinds[written.get("kind", "mlp")], path
        assert {key: typed[key] for key in written if key != "kind" or "kind" in typed} == \
            {key: value for key, value in written.items() if key != "kind" or "kind" in typed}, path
        seen.add(type(config))
    assert seen >= {kinds[name] for name in ("mlp", "transformer", "identity_fit", "landscape")}
