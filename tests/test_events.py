"""Run events (simulation/events.py): the trainer's structured output, and the timeline benchmark that reads it.

A tiny run trained here writes a start and an end line with its digest, kind, seed and CPU s; a failing run's
end says so; nothing is written without ``$RESIDUAL_EVENTS``; :func:`benchmarks.bench_timeline.trainings` splits
a real ``render.py train`` into its runs from these lines alone (slow: a render.py process).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.bench_timeline import record, summarise, trainings
from simulation.config import RunConfig
from simulation.events import EVENTS_ENV, read_events, training_run

from support import CLI_TINY

TINY = RunConfig(depth=3, steps=20, seed=3)


def test_a_trained_run_writes_its_start_and_end(tmp_path, monkeypatch, one_thread):
    from simulation.cache import get_traces

    path = tmp_path / "events.jsonl"
    monkeypatch.setenv(EVENTS_ENV, str(path))
    get_traces([TINY])
    start, end = read_events(path)
    assert (start["event"], end["event"]) == ("run_start", "run_end")
    for event in (start, end):
        assert (event["digest"], event["kind"], event["seed"], event["pid"]) == (TINY.digest(), "mlp", 3, os.getpid())
        assert "depth=3" in event["label"]
    assert end["ok"] is True and 0 < end["cpu_s"] and 0 < end["wall_s"] <= end["time"] - start["time"] + 1e-3
    get_traces([TINY])  # a cache hit trains nothing: no event
    assert len(read_events(path)) == 2


def test_a_failed_run_ends_with_ok_false_and_the_error(tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    monkeypatch.setenv(EVENTS_ENV, str(path))
    with pytest.raises(RuntimeError):
        with training_run("abc", "mlp", 0, "tiny"):
            raise RuntimeError("diverged\nsecond line")
    end = read_events(path)[-1]
    assert end["event"] == "run_end" and end["ok"] is False and end["error"] == "RuntimeError: diverged"


def test_nothing_is_written_without_the_variable_and_a_cut_line_is_skipped(tmp_path, monkeypatch):
    monkeypatch.delenv(EVENTS_ENV, raising=False)
    with training_run("abc", "mlp", 0, "tiny"):
        pass
    assert list(tmp_path.iterdir()) == []
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"event": "run_start", "digest": "abc"}) + '\n{"event": "run_e', encoding="utf-8")
    assert [e["digest"] for e in read_events(path)] == ["abc"] and read_events(tmp_path / "none") == []


def test_trainings_pair_each_start_with_its_end():
    """Two processes training at once; one dies before its end line (no CPU, it ends with the command)."""
    def event(kind, t, pid, digest, **more):
        return {"event": kind, "time": t, "pid": pid, "digest": digest, "kind": "mlp", "seed": 0, "label": digest,
                **more}

    run = {"wall_s": 9.0, "events": [
        event("run_start", 1.0, 10, "aaaa"), event("run_start", 1.5, 11, "bbbb"),
        event("run_end", 4.0, 10, "aaaa", ok=True, cpu_s=2.5, wall_s=3.0), event("run_start", 4.0, 10, "cccc")]}
    assert [(t["digest"], t["start"], t["end"], t["ok"]) for t in trainings(run)] == [
        ("aaaa", 1.0, 4.0, True), ("bbbb", 1.5, 9.0, False), ("cccc", 4.0, 9.0, False)]
    assert trainings(run)[0]["cpu"] == 2.5


@pytest.mark.slow  # a render.py process that imports torch and trains two tiny runs: ~10 s on a loaded machine
def test_the_timeline_splits_a_real_render_py_train_into_its_runs(isolated_cache):
    run = record(["train", "chain_rule", *CLI_TINY])
    assert run["returncode"] == 0
    found = trainings(run)
    cached = {p.stem for p in Path(isolated_cache).glob("*.npz")}
    assert len(found) == len(cached) >= 2 and {t["digest"] for t in found} == cached
    for t in found:
        assert t["ok"] and 0 < t["start"] < t["end"] <= run["wall_s"] and t["cpu"] > 0
    assert all(a["end"] <= b["start"] for a, b in zip(found, found[1:]))  # one after the other, in one process
    assert "training runs (from the trainer's run events):" in summarise(run, cores=2)
