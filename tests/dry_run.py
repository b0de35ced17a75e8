"""Build a scene without drawing or writing frames: the one dry-run recipe the scene tests share.

Example::

    from dry_run import built_scene
    scene = built_scene(IdentityHighway, "en", tiny_trace_files("residual_response"))

Two things are shared inside one test process (one pytest-xdist worker), because they cost most of a
dry run and never change what a test sees:

- Manim's LaTeX and Pango caches (``tex_dir``, ``text_dir``): files named by a hash of their content, so a
  formula compiled once is read back by every later dry run instead of calling latex and dvisvgm again.
- :func:`built_scene`: the scene after one dry run with the layout check on, per (scene, language, trace
  files). The layout, length, narration and numbers tests of one scene read the same build; tests that
  build a variant of their own (tampered traces, another theme) still call :func:`dry_run`.
  Their tests carry ``xdist_group(scene_group(scene, lang))`` so ``--dist loadgroup`` sends them to one worker.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest
from manim import tempconfig

from scenes.base import LectureScene

__all__ = ["built_scene", "cache_settings", "dry_run", "dry_settings", "scene_group", "scene_lang_params", "shared_manim_cache"]

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


def dry_settings(media) -> dict:
    """Manim settings for a dry run into ``media`` (no frames, no partial-movie hashing, quiet); LaTeX and
    Pango files go to :func:`shared_manim_cache`."""
    return {"dry_run": True, "disable_caching": True, "media_dir": str(media), "progress_bar": "none",
            "verbosity": "WARNING", **cache_settings()}


def dry_run(scene_class: type, media) -> LectureScene:
    """Run ``construct`` with every animation jumping to its end state (where layout and numbers are
    checked); returns the scene."""
    with tempconfig(dry_settings(media)):
        scene = scene_class(skip_animations=True)
        scene.render()
    return scene


def built_scene(scene: type, lang: str, trace_files: dict[str, str] | None = None) -> LectureScene:
    """``scene`` in ``lang`` after one dry run with ``check_layout`` on, reading ``trace_files`` (for a
    scene with an experiment); built once per process for each (scene, lang, files). Read it, never
    change it: other tests get the same object."""
    files = tuple(sorted(trace_files.items())) if trace_files is not None else None
    key = (scene, lang, files)
    if key not in _BUILT:
        attrs = {"lang": lang, "check_layout": True}
        if files is not None:
            attrs["trace_files"] = dict(files)
        media = Path(tempfile.mkdtemp(prefix="dry-run-media-", dir=shared_manim_cache()))
        _BUILT[key] = dry_run(type(scene.__name__, (scene,), attrs), media)
    return _BUILT[key]


def scene_group(scene: type, lang: str) -> str:
    """The pytest-xdist group of the tests that read ``built_scene(scene, lang, ...)``."""
    return f"scene-{scene.__name__}-{lang}"


def scene_lang_params(scenes, langs) -> list:
    """``pytest.param(scene, lang)`` for every pair, id ``Scene-lang``, each in its :func:`scene_group`."""
    return [pytest.param(scene, lang, id=f"{scene.__name__}-{lang}",
                         marks=pytest.mark.xdist_group(scene_group(scene, lang)))
            for lang in langs for scene in scenes]
