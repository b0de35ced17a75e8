"""Frame checks shared by the frame tests: the last frame against committed control data, and its tamper twin.

Example::

    from frame_checks import make_frame_test, assert_fails_when_tampered, same_cairo_as_control_data  # noqa: F401

Not a test module: test_frames.py, and the frame tests of other scenes, import from here (importing the
``same_cairo_as_control_data`` fixture makes it autouse in that module too).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import cairo
import numpy as np
import pytest
from manim.utils.testing import frames_comparison as manim_frames
from manim.utils.testing._frames_testers import _ControlDataWriter, _FramesTester

from scenes.kit.seeds import SeedSpread
from simulation.runkeys import RunKey
from simulation.trace import Trace

from data.make_traces import tiny_trace_files, tiny_trace_files_with_seeds
from dry_run import built_scene, frame_build, scene_group

__all__ = ["CONTROL_CAIRO", "CONTROL_DATA", "same_cairo_as_control_data", "scene_variant", "tiny_traces_of", "committed_traces",
           "assert_last_frame_matches", "make_frame_test", "assert_fails_when_tampered", "assert_numbers_match"]


# The control frames were drawn with Debian 12's cairo 1.16. Manim skips cairo < 1.18 because *its*
# control data come from 1.18; ours come from 1.16, so compare on the same major.minor and skip
# elsewhere (anti-aliasing differs between cairo releases): regenerate with --set_test there.
CONTROL_CAIRO = (1, 16)


@pytest.fixture(autouse=True)
def same_cairo_as_control_data(monkeypatch):
    running = tuple(int(part) for part in cairo.cairo_version_string().split(".")[:2])
    if running != CONTROL_CAIRO:
        pytest.skip(f"control frames were drawn with cairo {CONTROL_CAIRO}, this is cairo {running}")
    monkeypatch.setattr(manim_frames, "MIN_CAIRO_VERSION", 0)


def scene_variant(scene: type, trace_files: dict[RunKey, str], lang: str = "en", theme: str = "dark") -> type:
    """``scene`` reading ``trace_files`` instead of the cache, in ``lang`` and ``theme``."""
    return type(scene.__name__, (scene,), {"trace_files": trace_files, "lang": lang, "theme": theme})


def tiny_traces_of(scene: type) -> dict[RunKey, str] | None:
    """The committed tiny traces of ``scene``'s experiment (``{RunKey: path}``), the extra seeds' too for a scene
    that draws the seed spread; None where they are not all committed. Every test that builds a scene from
    committed traces asks here, so they ask tests/dry_run.built_scene for one build."""
    return (tiny_trace_files_with_seeds if issubclass(scene, SeedSpread) else tiny_trace_files)(scene.experiment)


def committed_traces(scene: type) -> dict[RunKey, str]:
    """:func:`tiny_traces_of`, which must be committed."""
    files = tiny_traces_of(scene)
    assert files is not None, f"no tiny traces for {scene.experiment!r}: run python tests/data/make_traces.py"
    return files


CONTROL_DATA = Path(__file__).parent / "control_data" / "scenes"  # test_frames.py: __module_test__ = "scenes"


def assert_last_frame_matches(built, name: str, write: bool = False) -> None:
    """``built.last_frame`` (dry_run.frame_build) against control data ``<name>.npz`` by Manim's own frame
    tester (the tolerances of ``frames_comparison``); ``write``: save it as the control data instead."""
    path = CONTROL_DATA / f"{name}.npz"
    if not write and path.is_file():
        with np.load(path) as control:  # a frame equal to the control frame passes any tolerance: no need to ask
            if np.array_equal(control["frame_data"][-1], built.last_frame):  # Manim's (~0.15 s of float maths)
                return
    tester = _ControlDataWriter(path, size_frame=built.last_frame.shape[:2]) if write else _FramesTester(path)
    with tester.testing():
        tester.check_frame(-1 if not write else 0, built.last_frame)


def make_frame_test(scene: type, name: str, trace_files: dict[RunKey, str] | None = None, lang: str = "en",
                    theme: str = "dark"):
    """A pytest function comparing the last frame of ``scene`` with control data ``<name>.npz``
    (``--set_test``: writing it).

    With the committed traces it compares the frame of :func:`dry_run.built_scene`, the build that the
    layout, narration and numbers tests of the scene read (one build, not two); given ``trace_files``
    (a tamper twin) it builds the scene anew by the same recipe (:func:`dry_run.frame_build`), without the
    layout check (read-only, ~20 % of a build; a twin compares the frame only, its layout is not tested)."""

    def test(request):
        write = request.config.getoption("--set_test")
        if trace_files is None:
            built = built_scene(scene, lang, committed_traces(scene) if scene.experiment else None, theme)
        else:
            built = frame_build(scene, lang, trace_files, theme, check_layout=False)
        assert_last_frame_matches(built, name, write=write)

    test.__name__ = f"test_{name}"
    test.pytestmark = [pytest.mark.xdist_group(scene_group(scene, lang))]
    return test


def twin_params(cases, lang: str = "en", suffix: str = "", slow=frozenset()) -> list:
    """``pytest.param(*case)`` for each (scene, name, run, key, tamper) case of a tamper-twin test, id ``name`` +
    ``suffix``, in the xdist group of the scene's build in ``lang`` (:func:`dry_run.scene_group`): the twin runs on
    the worker that built the scene and reuses its LaTeX and text caches. Names in ``slow`` are marked slow."""
    return [pytest.param(*case, id=f"{case[1]}{suffix}",
                         marks=[pytest.mark.xdist_group(scene_group(case[0], lang)),
                                *([pytest.mark.slow] if case[1] in slow else [])])
            for case in cases]


def assert_fails_when_tampered(request, tmp_path: Path, scene: type, name: str, run: RunKey, key: str,
                               tamper: Callable[[np.ndarray], np.ndarray], lang: str = "en",
                               theme: str = "dark") -> None:
    """Copy the committed traces, apply ``tamper`` to ``run``'s array ``key``, and expect the frame
    comparison against the untampered control data to fail."""
    if request.config.getoption("--set_test"):
        pytest.skip("writing control data: a tampered run must not overwrite it")
    files = {}
    for run_key, path in committed_traces(scene).items():
        files[run_key] = str(tmp_path / "traces" / f"{run_key.name}.{run_key.seed}.npz")  # seeds share file names
        Path(files[run_key]).parent.mkdir(exist_ok=True)
        shutil.copy(path, files[run_key])
    trace = Trace.load(files[run])
    original = trace[key].copy()
    trace.arrays[key] = tamper(original).astype(original.dtype)
    assert not np.array_equal(trace.arrays[key], original), "the tamper changed nothing"
    trace.save(files[run])
    check = make_frame_test(scene, name, trace_files=files, lang=lang, theme=theme)
    with pytest.raises(AssertionError, match="Frame no"):
        check(request=request)


def assert_numbers_match(shown: dict, expected: dict[str, float]) -> None:
    assert set(shown) == set(expected), f"extra {set(shown) - set(expected)}, missing {set(expected) - set(shown)}"
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, rel=1e-6, abs=1e-12), key
