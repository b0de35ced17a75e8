"""Every scene of the lecture builds in a Manim dry run, in English and Chinese, with a clean layout.

Example::

    pytest tests/test_scenes_all.py -k zh

Scenes read the tiny committed traces of ``tests/data/<experiment>/`` when they exist; for an
experiment without them (one added after the data were made) the tiny runs are trained once per
session into a temporary folder. Every subtitle cue, written as .srt and read back, must be readable at
17 characters/s (English) or 9 (Chinese). ``check_layout`` records, after each step (so at each beat's last
frame), every text outside the frame, in its 3 % margin or with a cap height below 1/45 of the frame (the
legibility floor, scenes/kit/layout.py), and every pair of overlapping texts; the layout log must stay empty, in
both languages and both themes. The default run checks every scene in English and dark, the Chinese builds of
dry_run.ZH_DEFAULT and the light builds of dry_run.LIGHT_DEFAULT (the builds the frame and theme tests read);
the slow set every scene in Chinese, every scene in English light and LIGHT_DEFAULT in Chinese light;
RESIDUAL_LAYOUT_MATRIX=1 adds the other Chinese light builds (every scene x language x theme). The last tests prove the checker itself catches each fault
(tests/test_legibility.py: the floor's and the margin's twins).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from manim import DOWN, RIGHT, UP, Dot, Text, VGroup, VMobject

from narration import i18n
from scenes import SCENES_IN_ORDER
from scenes.kit import layout
from scenes.kit.base import LectureScene
from support import FULL_LANGS as LANGS

from simulation.runkeys import RunKey

from data.make_traces import write_tiny_traces
from dry_run import LIGHT_DEFAULT, ZH_DEFAULT, built_scene, dry_run, scene_group, scene_lang_params
from frame_checks import tiny_traces_of
from subtitles import as_srt_cues, too_fast
from support import examples


@pytest.fixture(scope="session")
def trace_files(tmp_path_factory):
    """``scene -> {RunKey: path}``: the committed tiny traces the frame tests read too (tests/frame_checks.tiny_traces_of,
    the seed spread's included), or tiny runs trained now for an experiment without them."""
    folder, found = None, {}

    def get(scene: type) -> dict[RunKey, str]:
        nonlocal folder
        if scene not in found:
            files = tiny_traces_of(scene)
            if files is None:
                folder = folder or tmp_path_factory.mktemp("tiny-traces")
                files = write_tiny_traces(scene.experiment, folder)
            found[scene] = files
        return found[scene]

    return get




@pytest.mark.parametrize("scene,lang", scene_lang_params(SCENES_IN_ORDER, LANGS))
def test_scene_builds_with_clean_layout(scene, lang, trace_files):
    # the same build as the scene's own tests (tests/test_scenes_lecture.py ...): see dry_run.built_scene
    built = built_scene(scene, lang, trace_files(scene) if scene.experiment else None)
    assert built.layout_log == []
    assert built.renderer.num_plays > 0, "the scene played nothing"
    cues = as_srt_cues(built.renderer.file_writer.subcaptions)
    assert cues and too_fast(cues, lang) == [], "subtitles faster than reading (issue 9)"


# The Chinese light builds of every scene (~3 CPU s each) only when asked: the theme changes colours, not places or
# sizes, and the slow set's time is budgeted (CI within 20 min). RESIDUAL_LAYOUT_MATRIX=1 pytest -m slow -k light
# runs the whole matrix (docs/developers/tests.md).
FULL_MATRIX = os.environ.get("RESIDUAL_LAYOUT_MATRIX") == "1"


def _light_params() -> list:
    """(scene, lang) of every light build, each in its scene's xdist group: in the default run the English builds
    of LIGHT_DEFAULT (whose light frames and colours other tests compare: one build); in the slow set every English
    one (tests/test_theme.py builds them too) and the Chinese ones of LIGHT_DEFAULT; the rest with FULL_MATRIX."""
    def marks(scene, lang) -> list:
        if lang == "en" and scene.__name__ in LIGHT_DEFAULT:
            return []
        if lang == "en" or scene.__name__ in LIGHT_DEFAULT:
            return [pytest.mark.slow]
        return [pytest.mark.slow, pytest.mark.skipif(not FULL_MATRIX, reason="RESIDUAL_LAYOUT_MATRIX=1 runs it")]

    return [pytest.param(scene, lang, id=f"{scene.__name__}-{lang}-light",
                         marks=[pytest.mark.xdist_group(scene_group(scene, lang)), *marks(scene, lang)])
            for lang in LANGS for scene in SCENES_IN_ORDER]


@pytest.mark.parametrize("scene,lang", _light_params())
def test_scene_layout_is_clean_in_the_light_theme(scene, lang, trace_files):
    """The same check in the light theme: the theme changes colours only, so a fault here is a theme that moved
    or resized a text."""
    built = built_scene(scene, lang, trace_files(scene) if scene.experiment else None, "light")
    assert built.layout_log == []


def test_the_default_run_checks_a_representative_subset():
    """Both languages and both themes have scenes in the default run; together they use every kind of widget."""
    names = {scene.__name__ for scene in SCENES_IN_ORDER}
    assert ZH_DEFAULT <= names and LIGHT_DEFAULT <= names and ZH_DEFAULT and LIGHT_DEFAULT


@pytest.mark.parametrize("scene", SCENES_IN_ORDER, ids=lambda s: s.__name__)
def test_scene_strings_and_docstring(scene):
    doc = (scene.__doc__ or "").strip()
    assert doc and doc.splitlines()[0].strip(), f"{scene.__name__} needs a one-line docstring"
    for lang in LANGS:
        said = {key: scene.string(key, lang) for key in i18n.texts_of("en", i18n.owner_chain(scene))}
        assert said and all(text.strip() for text in said.values()), f"{scene.__name__} has an empty {lang} string"


def test_scene_names_are_unique():
    names = [scene.__name__ for scene in SCENES_IN_ORDER]
    assert len(names) == len(set(names))


class _LayoutProbe(LectureScene):
    """Two texts side by side: a clean layout, unless a subclass moves them."""

    strings = {"a": {"en": "alpha", "zh": "甲"}, "b": {"en": "omega", "zh": "乙"}}
    check_layout = True
    lang = "en"

    def construct(self) -> None:
        a, b = self.text("a"), self.text("b")
        b.next_to(a, RIGHT, buff=0.5)
        self.arrange(a, b)
        self.add(a, b)
        self.wait(0.1)

    def arrange(self, a, b) -> None:
        pass


class _Overlapping(_LayoutProbe):
    def arrange(self, a, b) -> None:
        b.move_to(a.get_center() + 0.1 * DOWN)


class _OffFrame(_LayoutProbe):
    overshoot = 0.5  # scene units past the top edge

    def arrange(self, a, b) -> None:
        b.to_edge(UP, buff=0).shift(self.overshoot * UP)


def test_layout_checker_passes_a_clean_layout(tmp_path):
    assert dry_run(_LayoutProbe, tmp_path).layout_log == []


def test_layout_checker_catches_overlapping_texts(tmp_path):
    log = dry_run(_Overlapping, tmp_path).layout_log
    assert len(log) == 1 and log[0].startswith("overlap:"), log
    assert "alpha" in log[0] and "omega" in log[0]


@pytest.mark.parametrize("overshoot", [0.5, 0.01])  # 0.01: the Chinese ChainRuleProduct line cut at the edge
def test_layout_checker_catches_text_outside_the_frame(tmp_path, overshoot):
    probe = type("_OffFrameBy", (_OffFrame,), {"overshoot": overshoot})
    log = dry_run(probe, tmp_path).layout_log
    assert len(log) == 1 and log[0].startswith("outside the frame:") and "omega" in log[0], log


def test_layout_checker_passes_text_touching_the_margin_from_inside(tmp_path):
    probe = type("_AtMargin", (_OffFrame,), {"overshoot": -layout.MARGIN * 8.0 - 0.01})
    assert dry_run(probe, tmp_path).layout_log == []


def test_layout_checker_catches_text_in_the_margin(tmp_path):
    probe = type("_InMargin", (_OffFrame,), {"overshoot": -0.1})
    log = dry_run(probe, tmp_path).layout_log
    assert len(log) == 1 and log[0].startswith("in the 3% margin:") and "omega" in log[0], log


_BOX_PROBES = {}


@settings(max_examples=examples(40), deadline=None)
@given(dx=st.floats(-9, 9), dy=st.floats(-6, 6), angle=st.floats(-3.2, 3.2), scale=st.floats(0.05, 4),
       which=st.sampled_from(["text", "group", "empty", "point"]))
def test_layout_box_is_the_four_edges_manim_reports(dx, dy, angle, scale, which):
    """layout.bounding_box (one pass over the boundary points) gives exactly Manim's get_left/right/bottom/top."""
    if not _BOX_PROBES:
        _BOX_PROBES.update(text=Text("alpha ‖x‖"), group=VGroup(Text("omega"), Dot().shift(2 * DOWN)), empty=VGroup(),
                           point=VGroup(Text("x"), VMobject().set_points(np.array([[3.0, -2.0, 0.0]]))))
    mob = _BOX_PROBES[which].copy().scale(scale).rotate(angle).shift([dx, dy, 0])
    assert layout.bounding_box(mob) == (mob.get_left()[0], mob.get_right()[0], mob.get_bottom()[1], mob.get_top()[1])
    # the same points as Manim's get_points_defining_boundary, each as often, in another order
    ours, manims = layout._points_defining_boundary(mob), mob.get_points_defining_boundary().reshape(-1, 3)
    assert sorted(map(tuple, ours)) == sorted(map(tuple, manims))
