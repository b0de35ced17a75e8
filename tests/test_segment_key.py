"""scenes/kit/segment_key.py: the one-pass segment key tells apart every two plays Manim's key tells apart, and is the
same in every process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from manim import (BLUE, RED, Circle, FadeIn, ImageMobject, Scene, Square, Text, Transform, ValueTracker, VGroup,
                   always_redraw, linear, smooth, tempconfig)
from manim.renderer import cairo_renderer
from manim.utils.hashing import get_hash_from_play_call as manim_key

from scenes.kit import segment_key

ROOT = Path(__file__).resolve().parent.parent
FINGERPRINT = "test-encoder"


def _keys(scene: Scene, *animations, key=segment_key.play_key) -> tuple[str, str]:
    """(Manim's key, ``key``) of playing ``animations`` now, as the Cairo renderer asks for them."""
    compiled = scene.compile_animations(*animations)
    args = (scene, scene.renderer.camera, compiled, scene.mobjects)
    options = {"backend": "cairo", "encoder_fingerprint": FINGERPRINT, "renderer_state": ()}
    return manim_key(*args, **options), key(*args, **options)


class Steps(Scene):
    """A scene whose every step changes one thing a frame depends on (or nothing: the repeats)."""

    def construct(self) -> None:
        self.rows: list[tuple[str, str, str]] = []  # (step, Manim's key, ours)

        def note(step: str, *animations) -> None:
            self.rows.append((step, *_keys(self, *animations)))

        square = Square(1.0, color=BLUE).shift(np.array([-2.0, 0.0, 0.0]))
        label = Text("gradient", font="DejaVu Sans", font_size=28)
        self.add(square)
        note("fade in", FadeIn(label))
        note("fade in again", FadeIn(label))  # nothing changed: the same key
        square.set_color(RED)
        note("colour", FadeIn(label))
        square.shift(np.array([1e-9, 0.0, 0.0]))
        note("a point moved by 1e-9", FadeIn(label))
        square.set_z_index(2)
        note("z index", FadeIn(label))
        square.set_stroke(width=7)
        note("stroke width", FadeIn(label))
        note("run time", FadeIn(label, run_time=2))
        note("rate function", FadeIn(label, rate_func=linear))
        note("rate function back", FadeIn(label, rate_func=smooth))
        note("shift of the animation", FadeIn(label, shift=np.array([0.0, 0.5, 0.0])))
        note("transform", Transform(label, Text("gradient", font="DejaVu Sans", font_size=30)))
        note("other words", Transform(label, Text("gradients", font="DejaVu Sans", font_size=28)))
        tracker = ValueTracker(1.0)
        scale = {"k": 1.0}
        dot = always_redraw(lambda: Circle(radius=0.1 * tracker.get_value() * scale["k"]))
        self.add(dot)
        note("an updater", FadeIn(label))
        tracker.set_value(2.0)
        note("the tracker's value", FadeIn(label))
        scale["k"] = 3.0  # read by the updater's closure only: the circle is redrawn at the next frame
        note("a value the updater's closure reads", FadeIn(label))
        image = ImageMobject(np.zeros((4, 4, 3), dtype=np.uint8))
        self.add(image)
        note("an image", FadeIn(label))
        image.pixel_array[1, 1] = 255
        note("one pixel of the image", FadeIn(label))
        self.remove(image, dot)
        note("fewer mobjects", FadeIn(label))


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> list[tuple[str, str, str]]:
    media = tmp_path_factory.mktemp("segment-key")
    with tempconfig({"dry_run": True, "media_dir": str(media), "progress_bar": "none", "verbosity": "WARNING",
                     "pixel_height": 90, "pixel_width": 160, "frame_rate": 5}):
        scene = Steps()
        scene.render()
    return scene.rows


def _coarser_than_manim(rows) -> list[tuple[str, str]]:
    """Pairs of steps our key gives one key where Manim's gives two: a segment that would be reused wrongly."""
    return [(a[0], b[0]) for i, a in enumerate(rows) for b in rows[i + 1:] if a[2] == b[2] and a[1] != b[1]]


def test_every_step_manim_tells_apart_gets_its_own_key(steps):
    assert _coarser_than_manim(steps) == []
    ours = {step: key for step, _, key in steps}
    assert ours["fade in"] == ours["fade in again"]  # the same play, the same key: the segment is reused
    # Back to the state of an earlier step (smooth is FadeIn's own rate function; the image and the updater gone):
    assert ours["stroke width"] == ours["rate function back"] == ours["fewer mobjects"]
    assert len(set(ours.values())) == len(steps) - 3  # every other step changed a drawn thing: a key of its own
    same = lambda rows, i: {(a[0], b[0]) for a in rows for b in rows if a[i] == b[i]}
    assert same(steps, 2) == same(steps, 1)  # here exactly Manim's partition of the plays


class _Blind(segment_key._KeyPickler):
    """The tamper twin: a key that reads an array's dtype and shape but not its values."""

    def reducer_override(self, obj):
        if type(obj) is np.ndarray and not obj.dtype.hasobject:
            return segment_key._array, (obj.dtype.str, obj.shape)
        return super().reducer_override(obj)


def test_a_key_blind_to_array_values_is_caught(steps, monkeypatch, tmp_path):
    monkeypatch.setattr(segment_key, "_KeyPickler", _Blind)
    with tempconfig({"dry_run": True, "media_dir": str(tmp_path), "progress_bar": "none", "verbosity": "WARNING",
                     "pixel_height": 90, "pixel_width": 160, "frame_rate": 5}):
        scene = Steps()
        scene.render()
    missed = _coarser_than_manim(scene.rows)
    assert ("z index", "stroke width") not in missed  # not arrays: still told apart
    assert any("1e-9" in a or "1e-9" in b for a, b in missed), missed


MUTATIONS = {
    "point": lambda group, x: group[0].points.__setitem__((0, 0), group[0].points[0, 0] + x),
    "fill": lambda group, x: group[1].set_fill(opacity=min(1.0, abs(x) % 1)),
    "stroke": lambda group, x: group[0].set_stroke(width=1 + abs(x) % 9),
    "colour": lambda group, x: group[1].set_color([RED, BLUE][int(abs(x) * 10) % 2]),
    "z": lambda group, x: group[1].set_z_index(int(x * 10) % 7),
    "scale": lambda group, x: group.scale(1 + abs(x) % 2),
    "nested": lambda group, x: group[2][0].shift(np.array([x, 0.0, 0.0])),
    "add": lambda group, x: group[2].add(Square(0.1 + abs(x) % 1)),
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(sorted(MUTATIONS)), st.floats(-3, 3, allow_nan=False, width=32)),
                min_size=1, max_size=4))
def test_any_change_manim_sees_changes_our_key(tmp_path, changes):
    with tempconfig({"dry_run": True, "media_dir": str(tmp_path), "progress_bar": "none", "verbosity": "WARNING"}):
        scene = Scene()
        group = VGroup(Square(1.0), Circle(0.5), VGroup(Square(0.3), Circle(0.2)))
        scene.add(group)
        before = _keys(scene, FadeIn(group[1]))
        for name, x in changes:
            MUTATIONS[name](group, float(x))
        after = _keys(scene, FadeIn(group[1]))
    if before[0] != after[0]:
        assert before[1] != after[1], changes
    else:  # nothing Manim reads changed (a zero shift, the same colour): ours may still see the arrays rewritten
        assert before[0] == after[0]


def _state_keys(media: str, texts: str) -> list[str]:
    """Both keys of a small scene with a text (its SVG in ``texts``) and an updater, media in ``media``."""
    with tempconfig({"dry_run": True, "media_dir": media, "text_dir": texts, "progress_bar": "none",
                     "verbosity": "WARNING"}):
        scene = Scene()
        square, label = Square(1.0), Text("norm ‖x‖", font="DejaVu Sans", font_size=28)
        scene.add(square, label)
        label.add_updater(lambda m: m.next_to(square, np.array([0.0, 1.0, 0.0])))
        return list(_keys(scene, FadeIn(label, shift=np.array([0.0, 0.5, 0.0]))))


_CHILD = "import json, sys; from tests.test_segment_key import _state_keys; print(json.dumps(_state_keys(*sys.argv[1:])))"


@pytest.mark.xdist_group("manim-probes")  # the worker that holds the Manim probe server (tests/forked.py)
def test_the_key_is_the_same_in_every_process(tmp_path):
    """Another process with other string hashing (PYTHONHASHSEED) and another private media folder, whose text
    cache holds the same SVG files (a text's path differs): the same key, so a re-render (or a pooled one) finds
    the segments a lone render cached. (Pango numbers the SVG surfaces it writes in a process, and the numbers
    reach both keys: the texts come from the shared cache, as cli/media.py links them in.)"""
    from forked import run_forked

    # a child of tests/forked.py's Manim server, which hashes strings with PYTHONHASHSEED=0 (this process: at random)
    args = f"sys.argv[1:] = {[str(tmp_path / 'child'), str(tmp_path / 'child-texts')]!r}\n"
    out = run_forked("import sys\n" + args + _CHILD, server="manim")
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    shutil.copytree(tmp_path / "child-texts", tmp_path / "texts")
    here = _state_keys(str(tmp_path / "here"), str(tmp_path / "texts"))
    assert theirs[0] == here[0]  # Manim's: the scene is the same
    assert theirs[1] == here[1] and len(here[1]) == 64


def test_install_replaces_only_manims_own_function(monkeypatch):
    monkeypatch.setattr(cairo_renderer, "get_hash_from_play_call", segment_key._ORIGINAL)
    assert segment_key.install() and segment_key.installed() and segment_key.install()
    assert cairo_renderer.get_hash_from_play_call is segment_key.play_key
    monkeypatch.setattr(cairo_renderer, "get_hash_from_play_call", lambda *a, **k: "another")
    assert not segment_key.install() and not segment_key.installed()


def test_what_pickle_cannot_write_falls_back_to_manims_key(tmp_path, monkeypatch):
    def refuse(self, obj):
        raise RecursionError("too deep")

    with tempconfig({"dry_run": True, "media_dir": str(tmp_path), "progress_bar": "none", "verbosity": "WARNING"}):
        scene = Scene()
        scene.add(Square(1.0))
        monkeypatch.setattr(segment_key._KeyPickler, "dump", refuse)
        theirs, ours = _keys(scene, FadeIn(scene.mobjects[0]))
    assert ours == theirs


@pytest.mark.parametrize("backend,fingerprint", [("vulkan", "x"), ("cairo", "")])
def test_bad_backend_or_fingerprint_is_refused_like_manim(backend, fingerprint):
    with pytest.raises(ValueError):
        segment_key.play_key(None, None, [], [], backend=backend, encoder_fingerprint=fingerprint, renderer_state=())
    with pytest.raises(ValueError):
        manim_key(None, None, [], [], backend=backend, encoder_fingerprint=fingerprint, renderer_state=())
