"""Build a scene without drawing or writing frames: the one dry-run recipe the scene tests share.

Example::

    from dry_run import built_scene
    scene = built_scene(IdentityHighway, "en", tiny_trace_files("residual_response"))

Two things are shared inside one test process (one pytest-xdist worker), because they cost most of a
dry run and never change what a test sees:

- Manim's LaTeX and Pango caches (``tex_dir``, ``text_dir``): files named by a hash of their content, so a
  formula compiled once is read back by every later dry run instead of calling latex and dvisvgm again.
  (Not shared between processes: Manim's SVG parser writes and removes a temporary file beside each SVG.) A
  formula's SVG (LaTeX and dvisvgm: ~0.22 CPU s in the two child processes) is also published to the session's
  folder ``$RESIDUAL_TEST_CACHE/manim-tex`` (tests/conftest.py; CI keeps it for both of its runs) and copied from
  there into a process's own folder before Manim looks for it: one compile per formula per session, not one per
  pytest-xdist worker (:func:`tex_to_svg_shared`).
- :func:`built_scene`: the scene after one dry run with the layout check on, per (scene, language, trace
  files, theme). The layout, length, narration, numbers *and frame* tests of one scene read the same build
  (:func:`frame_build` runs it under the settings of Manim's ``frames_comparison`` and keeps its last
  frame, so tests/test_frames.py compares that frame instead of building the scene once more); tests that
  build a variant of their own (tampered traces, another theme) call :func:`frame_build` or :func:`dry_run`.
  Their tests carry ``xdist_group(scene_group(scene, lang))`` so ``--dist loadgroup`` sends them to one worker.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from manim import config, tempconfig
from manim.mobject.text import tex_mobject
from manim.utils import tex_file_writing
from manim.utils.testing.frames_comparison import _config_test

from scenes.kit.base import LectureScene

from theme_checks import colour_checked

__all__ = ["built_scene", "cache_settings", "dry_run", "dry_settings", "frame_build", "frame_settings", "scene_group",
           "scene_lang_params", "shared_manim_cache", "ZH_DEFAULT", "LIGHT_DEFAULT"]

DEFAULT_FRAME_RATE = config.frame_rate  # Manim's default (60): what every dry run of the tests runs at
_CACHE: dict[str, Path] = {}
_BUILT: dict[tuple, LectureScene] = {}


def shared_manim_cache() -> Path:
    """This process's folder for Manim's content-addressed LaTeX/Pango files (removed at exit)."""
    if "path" not in _CACHE:
        _CACHE["path"] = Path(tempfile.mkdtemp(prefix="dry-run-manim-"))
        atexit.register(shutil.rmtree, _CACHE["path"], ignore_errors=True)
    return _CACHE["path"]


def cache_settings() -> dict:
    """Manim settings that send LaTeX and Pango files to :func:`shared_manim_cache` (also given to
    ``frames_comparison``, whose own default is a fresh folder per test)."""
    cache = shared_manim_cache()
    return {"tex_dir": str(cache / "Tex"), "text_dir": str(cache / "texts")}


SHARED_CACHE_ENV = "RESIDUAL_TEST_CACHE"  # support.SHARED_CACHE_ENV: the session's folder (tests/conftest.py)
_TEX_TO_SVG = tex_file_writing.tex_to_svg_file  # Manim's: compiles unless the SVG is in config's tex_dir


def _copy_into(src: Path, dst: Path) -> None:
    """``src`` copied to ``dst`` through a hidden file in ``dst``'s folder and one atomic rename: a reader of ``dst``
    sees the whole file or none (another process may be reading or writing the same name)."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


def tex_to_svg_shared(expression: str, environment: str | None = None, tex_template=None) -> Path:
    """Manim's ``tex_to_svg_file`` with one more place to look: the SVG of the same TeX file (named by the hash of
    its whole source, as Manim names it) that another process of this session compiled, copied into this process's
    ``tex_dir`` first; a formula compiled here is published for the others. Outside a test session (no
    ``$RESIDUAL_TEST_CACHE``) Manim's own."""
    session = os.environ.get(SHARED_CACHE_ENV)
    if not session:
        return _TEX_TO_SVG(expression, environment, tex_template)
    shared = Path(session) / "manim-tex"
    template = tex_template if tex_template is not None else config["tex_template"]
    svg = tex_file_writing.generate_tex_file(expression, environment, template).with_suffix(".svg")
    published = shared / svg.name
    if not svg.exists() and published.is_file():
        _copy_into(published, svg)
    result = _TEX_TO_SVG(expression, environment, tex_template)
    if not published.exists() and Path(result).is_file():
        shared.mkdir(exist_ok=True)
        _copy_into(Path(result), published)
    return result


tex_mobject.tex_to_svg_file = tex_to_svg_shared  # the name MathTex and Tex call


SMALL_FRAME = {"pixel_height": 480, "pixel_width": 854}  # 16:9 as the default: same scene units, a quarter of the pixels


def dry_settings(media) -> dict:
    """Manim settings for a dry run into ``media`` (no frames written, no partial-movie hashing, quiet, the
    frame drawn after each play at 854x480); LaTeX and Pango files go to :func:`shared_manim_cache`."""
    return {"dry_run": True, "disable_caching": True, "media_dir": str(media), "progress_bar": "none",
            "verbosity": "WARNING", **SMALL_FRAME, **cache_settings()}


_DEFERRED = object()  # the renderer's static_image while the static mobjects of a play are not drawn yet


def defer_drawing(renderer) -> None:
    """Make a Cairo renderer that skips animations draw nothing until a frame is asked for.

    While animations are skipped Manim still draws every play: the play's static mobjects into a background
    (``save_static_frame_data``), then the moving ones (``render`` or, for a wait, ``update_frame``), and it
    copies the frame for ``add_frame``, which drops it. A dry run reads at most its last frame, so this
    renderer only notes the last drawing asked for, with the static mobjects of its play, and draws it the same
    way (background from the static mobjects, then the rest) when ``get_frame`` is called. The frame tests'
    control frames are the same pixels either way (they are compared, not regenerated). Raises RuntimeError
    if the renderer stops skipping animations."""
    cls = type(renderer)
    state: dict = {"static": None, "pending": None}

    def skipping() -> None:
        if not renderer.skip_animations:
            raise RuntimeError("defer_drawing: the renderer stopped skipping animations")

    def save_static_frame_data(scene, static_mobjects):
        skipping()
        state["static"] = list(static_mobjects) or None
        renderer.static_image = _DEFERRED if state["static"] else None
        return None

    def update_frame(scene, mobjects=None, include_submobjects=True, ignore_skipping=True, **kwargs):
        skipping()
        if not ignore_skipping:
            return  # Manim's update_frame does nothing then, while skipping
        static = state["static"] if renderer.static_image is _DEFERRED else None
        state["pending"] = (scene, list(mobjects) if mobjects else None, include_submobjects, kwargs, static)

    def render(scene, time, moving_mobjects=None):
        update_frame(scene, moving_mobjects)  # add_frame drops the frame while skipping

    def freeze_current_frame(duration):
        skipping()  # add_frame drops the frame while skipping

    def get_frame():
        if state["pending"] is not None:
            scene, mobjects, include_submobjects, kwargs, static = state["pending"]
            state["pending"] = None
            renderer.static_image = None
            if static:
                cls.update_frame(renderer, scene, mobjects=static)
                renderer.static_image = cls.get_frame(renderer)
            cls.update_frame(renderer, scene, mobjects=mobjects, include_submobjects=include_submobjects, **kwargs)
        return cls.get_frame(renderer)

    skipping()
    for func in (save_static_frame_data, update_frame, render, freeze_current_frame, get_frame):
        setattr(renderer, func.__name__, func)


def dry_run(scene_class: type, media) -> LectureScene:
    """Run ``construct`` with every animation jumping to its end state (where layout and numbers are
    checked), drawing nothing (:func:`defer_drawing`); returns the scene."""
    with tempconfig(dry_settings(media)):
        scene = scene_class(skip_animations=True)
        defer_drawing(scene.renderer)
        scene.render()
    return scene


def frame_settings(media) -> dict:
    """Manim's test config for a last-frame comparison (854x480, caching off), dry run, at Manim's default
    frame rate: the scenes round waits and narration to whole frames, so a scene's length (which the
    tests check) depends on it, its last frame does not. LaTeX/Pango files go to
    :func:`shared_manim_cache`; nothing is written under ``media``."""
    return {**_config_test(True), "frame_rate": DEFAULT_FRAME_RATE, "dry_run": True, "media_dir": str(media),
            "progress_bar": "none", "verbosity": "WARNING", **cache_settings()}


def frame_build(scene: type, lang: str, trace_files: dict[str, str] | None = None, theme: str = "dark",
                check_layout: bool = True) -> LectureScene:
    """``scene`` in ``lang`` and ``theme`` reading ``trace_files``, after one dry run under
    :func:`frame_settings`; ``last_frame`` holds the frame ``frames_comparison`` would compare (the same
    end-of-construct step: the last animation brought to its end and drawn once more); tests/test_frames.py
    writes its control data from it too (``--set_test``). Not cached."""
    attrs = {"lang": lang, "theme": theme, "check_layout": check_layout}
    if trace_files is not None:
        attrs["trace_files"] = dict(trace_files)

    def construct(self) -> None:
        super(variant, self).construct()
        if self.animations is not None:  # what manim.utils.testing._make_test_scene_class does after construct
            self.update_to_time(self.get_run_time(self.animations))
            self.renderer.render(self, 1, self.moving_mobjects)

    attrs["construct"] = construct
    variant = type(scene.__name__, (scene,), attrs)
    media = Path(tempfile.mkdtemp(prefix="dry-run-media-", dir=shared_manim_cache()))
    with tempconfig(frame_settings(media)):
        built = variant(skip_animations=True)
        defer_drawing(built.renderer)  # only the last frame is drawn
        built.render()
        built.last_frame = built.renderer.get_frame().copy()
    return built


def built_scene(scene: type, lang: str, trace_files: dict[str, str] | None = None,
                theme: str = "dark") -> LectureScene:
    """``scene`` in ``lang`` and ``theme`` after one dry run with ``check_layout`` on, reading
    ``trace_files`` (for a scene with an experiment): :func:`frame_build`, once per process for each
    (scene, lang, files, theme); a build in another theme than dark records ``colour_log`` and ``contrast_log``
    (tests/theme_checks.colour_checked). Read it, never change it: other tests get the same object."""
    files = tuple(sorted(trace_files.items())) if trace_files is not None else None
    key = (scene, lang, files, theme)
    if key not in _BUILT:
        # A light build also records foreign colours and unreadable text after every step (tests/theme_checks.py):
        # the light frame test and tests/test_theme.py's colour check of a scene read one build, not two.
        built = colour_checked(scene, theme, None) if theme != "dark" else scene
        _BUILT[key] = frame_build(built, lang, dict(files) if files is not None else None, theme)
    return _BUILT[key]


def scene_group(scene: type, lang: str) -> str:
    """The pytest-xdist group of the tests that read ``built_scene(scene, lang, ...)``."""
    return f"scene-{scene.__name__}-{lang}"


# Chinese builds in the default run: one trace-driven chart scene and one study-note scene, whose Chinese frames
# (and their tamper twins) it compares (tests/test_frames.py, tests/test_copy_fit_belt_frames.py); every other
# scene's Chinese build (~1.5-2.5 CPU s each, in every test file that takes its params from scene_lang_params or
# reads this set) runs in the slow set, which CI runs (issue 21: the default run within 120 yardsticks).
ZH_DEFAULT = {"DepthSweep", "ConveyorBelt"}
# Light builds in the default run: the four scenes whose light frames it compares (together they use every widget:
# tests/test_frames.py, tests/test_theme.py); every scene's light build, in both languages, in the slow set.
LIGHT_DEFAULT = {"ChainRuleProduct", "Degradation", "PathEnsemble", "Summary"}


def scene_lang_params(scenes, langs) -> list:
    """``pytest.param(scene, lang)`` for every pair, id ``Scene-lang``, each in its :func:`scene_group`;
    Chinese ones of scenes outside :data:`ZH_DEFAULT` are marked slow."""
    return [pytest.param(scene, lang, id=f"{scene.__name__}-{lang}",
                         marks=[pytest.mark.xdist_group(scene_group(scene, lang)),
                                *([pytest.mark.slow] if lang == "zh" and scene.__name__ not in ZH_DEFAULT else [])])
            for lang in langs for scene in scenes]
