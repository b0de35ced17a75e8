"""Build a scene without drawing or writing frames: the one dry-run recipe the scene tests share."""

from __future__ import annotations

from manim import tempconfig

from scenes.base import LectureScene


def dry_settings(media) -> dict:
    """Manim settings for a dry run into ``media`` (no frames, no partial-movie hashing, quiet)."""
    return {"dry_run": True, "disable_caching": True, "media_dir": str(media), "progress_bar": "none",
            "verbosity": "WARNING"}


def dry_run(scene_class: type, media) -> LectureScene:
    """Run ``construct`` with every animation jumping to its end state (where layout and numbers are
    checked); returns the scene."""
    with tempconfig(dry_settings(media)):
        scene = scene_class(skip_animations=True)
        scene.render()
    return scene
