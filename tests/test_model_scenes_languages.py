"""The scenes of a user's own network in Spanish and in the pseudo-locale: the layout check passes.

Example::

    pytest tests/test_model_scenes_languages.py -n 0

The lecture's own scenes are checked in Spanish and en-XA by tests/test_i18n.py; these are the scenes that draw a
user's model (scenes.MODEL_SCENES: the lecture scenes' variants and DepthTimeMap) from the committed user-like runs of
tests/data/model/gpt2_24 (a real plain and residual MLP of 24 blocks named like GPT-2's), and the run watched in a
user's own loop (``render.py render GradientFlowOverTraining --trace FILE``: the residual run alone). The layout check
(scenes/kit/layout.py) runs after every animation: no text over another, none closer than a word space beside another
on one line, none over a marker (a curve's tip, a path's end), none past the frame or in its margin, none below the
legibility floor. The tamper twins below build the old layouts (end labels pushed onto their dots, a heading wider
than its half of the line) and the check reports them.
"""

from __future__ import annotations

import numpy as np
import pytest
from manim import RIGHT, Dot

import scenes
from scenes import user_model
from scenes.kit.layout import MIN_GAP, layout_problems
from scenes.kit.style import make_text

from data.make_traces import user_like_trace_files
from dry_run import frame_build

FRAME_W, FRAME_H = 14.222222222222221, 8.0
# Spanish in the default run (8 builds, ~1.5 CPU s each); the pseudo-locale's longer words (the fitter at work in
# every scene, ~2.5 CPU s each) with the slow set, which CI runs.
LANGS = ("es", pytest.param("en-XA", marks=pytest.mark.slow))


def _files(scene: type, watched: bool = False) -> dict[str, str]:
    files = user_like_trace_files("gpt2_24")
    return {"residual": files["residual"]} if watched or scene is scenes.DepthTimeMap else dict(files)


CASES = [*[pytest.param(scene, False, id=scene.__name__) for scene in scenes.MODEL_SCENES],
         pytest.param(user_model.ModelGradientFlowOverTraining, True, id="GradientFlowOverTraining-trace")]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("scene,watched", CASES)
def test_the_model_scenes_fit_in_other_words(scene, watched, lang):
    """Every user-model scene (and the watched run's) in ``lang``: the layout check finds nothing after any step."""
    built = frame_build(scene, lang, _files(scene, watched))
    assert built.layout_log == []
    assert built.renderer.num_plays > 0


# -- the check itself, and the old layouts it fails on -----------------------------------------------------------

def test_texts_side_by_side_closer_than_a_word_space_are_reported():
    left = make_text("error de entrenamiento", size=28)
    touching = make_text("error de test", size=28).next_to(left, RIGHT, buff=0.05)
    assert any("too close" in p for p in layout_problems([left, touching], FRAME_W, FRAME_H))
    apart = make_text("error de test", size=28).next_to(left, RIGHT, buff=MIN_GAP + 0.05)
    assert layout_problems([left, apart], FRAME_W, FRAME_H) == []
    below = make_text("error de test", size=28).next_to(left, np.array([0, -1, 0]), buff=0.05)  # another line
    assert layout_problems([left, below], FRAME_W, FRAME_H) == []


def test_a_text_over_a_marker_is_reported():
    dot = Dot([0, 0, 0], radius=0.07)
    over = make_text("pérdida", size=18).move_to([0.2, 0, 0])
    assert any("over a marker" in p for p in layout_problems([dot, over], FRAME_W, FRAME_H))
    beside = make_text("pérdida", size=18).next_to(dot, RIGHT, buff=0.1)
    assert layout_problems([dot, beside], FRAME_W, FRAME_H) == []


def test_the_old_end_labels_sat_on_their_dots(monkeypatch):
    """The blocks' span as it was (fixed, whatever the words) and the fitter as it was (blind to markers): in Spanish
    it pushed "entrada" and "pérdida" inside the margin, onto the input and loss dots; the check reports all four
    (two rows). (The fitter now also moves a text off a dot: the last test here.)"""
    import scenes.kit.fit

    class Fixed(user_model.ModelGradientFlowOverTraining):
        def _measured_span(self):
            return type(self)._x_span

    monkeypatch.setattr(scenes.kit.fit, "markers", lambda mobjects: [])
    built = frame_build(Fixed, "es", _files(Fixed))
    covered = [p for p in built.layout_log if "over a marker" in p]
    assert len(covered) == 4 and any("'entrada'" in p for p in covered) and any("'pérdida'" in p for p in covered)


def test_the_old_headings_ran_into_each_other():
    """ModelDegradation's headings as they were (one line each, however long), moved inside the margin (then by the
    fitter, here by the scene): in Spanish the first runs up to the second ("…4 pasos)error de test", 0.077 apart);
    the check reports them. (The fitter now parts such texts too: the last test here.)"""
    class OneLine(user_model.ModelDegradation):
        fit_words = False  # the layout as drawn, not as scenes.kit.fit would mend it

        def wrapped(self, key, size=28, color=None, width=None, **fmt):
            return self.text(key, size=size, color=color, **fmt)

    built = frame_build(OneLine, "es", _files(OneLine))
    assert any("too close" in p and "errordetest" in p for p in built.layout_log), built.layout_log  # Pango: no spaces


def test_the_fitter_moves_a_new_text_off_a_neighbour_it_touches():
    """Two headings on one line 0.03 apart (no overlap, so the fitter once let them be): the new one gives way until
    they are a word space apart, and the check that reported them passes."""
    from manim import FadeIn

    from scenes.kit.fit import fit_texts

    shown = make_text("[éŕŕöŕ ðé éñţŕéñåmîéñţö]", size=28).move_to([-3.0, 2.0, 0])
    new = make_text("[éŕŕöŕ ðé ţéšţ]", size=28).next_to(shown, RIGHT, buff=0.03)
    assert any("too close" in p for p in layout_problems([shown, new], FRAME_W, FRAME_H))
    notes = fit_texts([shown], FRAME_W, FRAME_H, [FadeIn(new)])
    assert len(notes) == 1 and layout_problems([shown, new], FRAME_W, FRAME_H) == [], notes


def test_the_fitter_moves_a_new_text_off_a_marker():
    """A label pushed onto a dot (the old end labels): it leaves the dot, and the check that reported it passes."""
    from manim import FadeIn

    from scenes.kit.fit import fit_texts

    dot = Dot([5.95, 1.3, 0], radius=0.07)
    label = make_text("pérdida", size=18).move_to([6.2, 1.3, 0])
    assert any("over a marker" in p for p in layout_problems([dot, label], FRAME_W, FRAME_H))
    notes = fit_texts([dot], FRAME_W, FRAME_H, [FadeIn(label)])
    assert len(notes) == 1 and "marker" in notes[0] and layout_problems([dot, label], FRAME_W, FRAME_H) == [], notes
