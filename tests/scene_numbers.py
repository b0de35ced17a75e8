"""The numbers check of a seed-spread scene and its tamper twin, shared by the issue-23 scene tests.

Example::

    from scene_numbers import check_numbers, check_tampered_numbers
    check_numbers(NormFree, norm_free_numbers, {"forward.seeds", "trains.seeds"})

``expected(traces)`` recomputes, from ``{RunKey: Trace}``, every number the scene records except its
"k of N seeds" counts (keys ending ``.seeds`` / ``.of``), which each scene's verdict tests check.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from simulation.runkeys import RunKey
from simulation.trace import Trace

from data.make_traces import tiny_trace_files_with_seeds
from dry_run import built_scene, dry_run
from frame_checks import assert_numbers_match, scene_variant

__all__ = ["check_numbers", "check_tampered_numbers"]


def _with_counts(expected: dict, shown: dict) -> dict:
    return {**expected, **{k: shown[k] for k in shown if k.endswith((".seeds", ".of"))}}


def check_numbers(scene: type, expected: Callable[[dict], dict], counts: set[str]) -> None:
    """The scene built from the committed tiny traces records exactly ``expected(traces)`` plus ``counts``,
    and marks nothing missing."""
    files = tiny_trace_files_with_seeds(scene.experiment)
    shown = built_scene(scene, "en", files).numbers
    assert counts <= set(shown["values"])
    assert_numbers_match(shown["values"], _with_counts(expected({k: Trace.load(v) for k, v in files.items()}),
                                                       shown["values"]))
    assert shown["missing"] == []


def check_tampered_numbers(scene: type, expected: Callable[[dict], dict], run: RunKey, key: str,
                           change: Callable[[np.ndarray], np.ndarray], tmp_path: Path) -> None:
    """The twin: with ``change`` applied to ``run``'s array ``key`` the scene's numbers differ from the
    untampered ones and equal ``expected`` of the tampered traces."""
    files = dict(tiny_trace_files_with_seeds(scene.experiment))
    traces = {k: Trace.load(v) for k, v in files.items()}
    untampered = expected(traces)
    traces[run].arrays[key] = change(traces[run][key])
    files[run] = str(traces[run].save(tmp_path / "tampered.npz"))
    shown = dry_run(scene_variant(scene, files), tmp_path).numbers["values"]
    with pytest.raises(AssertionError):
        assert_numbers_match({k: v for k, v in shown.items() if k in untampered}, untampered)
    assert_numbers_match(shown, _with_counts(expected(traces), shown))
