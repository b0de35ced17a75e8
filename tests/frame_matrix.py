"""Frame tests of one scene in English and Chinese, dark and light theme, each with a tamper twin.

Example::

    globals().update(frame_matrix(RankCollapse, "rank_collapse", run=RunKey("san", 0), key="rank_residual",
                                  tamper=np.sqrt))

The tests are those of tests/frame_checks.py (:func:`frame_checks.make_frame_test`, control data
``<stem>_<lang>[_light].npz`` under tests/control_data/scenes/, :func:`frame_checks.assert_fails_when_tampered`),
made for the four combinations at once; the module that puts them in its globals needs
``same_cairo_as_control_data`` imported too (the autouse cairo check) and ``__module_test__ = "scenes"``.
As for the lecture's other scenes (tests/dry_run.ZH_DEFAULT, tests/test_frames.LIGHT_DEFAULT), the default run
compares the English dark frame and its twin; the Chinese and light ones, each with its twin, are slow (CI runs
them). Each twin is in the xdist group of the build it tampers (:func:`dry_run.scene_group`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from simulation.runkeys import RunKey

from dry_run import scene_group
from frame_checks import assert_fails_when_tampered, make_frame_test

__all__ = ["CASES", "DEFAULT_CASE", "frame_matrix"]

CASES = [(lang, theme) for lang in ("en", "zh") for theme in ("dark", "light")]
DEFAULT_CASE = ("en", "dark")  # in the default run; the other three (and their twins) are slow


def frame_matrix(scene: type, stem: str, run: RunKey, key: str, tamper: Callable[[np.ndarray], np.ndarray]
                 ) -> dict[str, Callable]:
    """``{test name: test}``: a frame test per (language, theme) and one tamper twin parametrized over them,
    which changes ``run``'s array ``key`` with ``tamper`` and expects every comparison to fail."""
    def name(lang: str, theme: str) -> str:
        return f"{stem}_{lang}" + ("_light" if theme == "light" else "")

    def slow_unless_default(case: tuple[str, str]) -> list:
        return [] if case == DEFAULT_CASE else [pytest.mark.slow]

    tests = {}
    for lang, theme in CASES:
        test = make_frame_test(scene, name(lang, theme), lang=lang, theme=theme)
        test.pytestmark += slow_unless_default((lang, theme))
        tests[f"test_{name(lang, theme)}"] = test

    @pytest.mark.parametrize(("lang", "theme"), [
        pytest.param(lang, theme, id=name(lang, theme),
                     marks=[pytest.mark.xdist_group(scene_group(scene, lang)), *slow_unless_default((lang, theme))])
        for lang, theme in CASES])
    def test_tampered(request, tmp_path, lang, theme):
        assert_fails_when_tampered(request, tmp_path, scene, name(lang, theme), run=run, key=key, tamper=tamper,
                                   lang=lang, theme=theme)

    test_tampered.__name__ = f"test_{stem}_frame_fails_on_tampered_trace"
    tests[test_tampered.__name__] = test_tampered
    return tests
