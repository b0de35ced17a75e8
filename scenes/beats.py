"""Beats: the narration points of a scene as slide stops, on top of Manim's own sections.

Example::

    python render.py slides IdentityHighway --format html     # one slide per beat

Every :meth:`LectureScene.narrate` starts a beat. A beat is one Manim section (``Scene.next_section``), so with
``save_sections`` Manim writes each beat's video segment itself (concatenated from the same cached partial
movies as the whole video: no second render, no second copy of the scene code). The first beat also holds
whatever was drawn before the first narration; a narration followed by no animation joins the next one (Manim
drops empty sections). The record, ``<Scene>.beats.json`` beside the video, holds per beat its narration
lines in English and Chinese, its start and end in seconds of the scene's video, and the numbers
:meth:`LectureScene.number` recorded while it ran.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BeatLog", "BEATS_VERSION"]

BEATS_VERSION = 1  # bump when the layout of <Scene>.beats.json changes


class BeatLog:
    """The beats of one scene being rendered; ``scene`` is the :class:`manim.Scene` (read for time and sections)."""

    def __init__(self, scene: Any) -> None:
        self.scene = scene
        self.beats: list[dict[str, Any]] = []
        self._pending_numbers: dict[str, Any] = {}  # numbers recorded before the first narration

    def _writer(self) -> Any:
        return getattr(getattr(self.scene, "renderer", None), "file_writer", None)

    def begin(self, key: str, lines: dict[str, str]) -> None:
        """Start a beat at the scene's current time, narrated by ``lines`` ({"en": ..., "zh": ...})."""
        writer = self._writer()
        sections = getattr(writer, "sections", None)
        if self.beats and sections and sections[-1].is_empty():
            # Nothing was animated since the last narration: one stop, both lines.
            self._add_line(self.beats[-1], key, lines)
            return
        if self.beats and sections is not None:
            self.scene.next_section(f"beat {len(self.beats):02d} {key}")
        beat = {"index": len(self.beats), "keys": [], "narration": {"en": [], "zh": []},
                "start": float(self.scene.time), "numbers": dict(self._pending_numbers),
                "_section": sections[-1] if sections else None}
        self._pending_numbers.clear()
        self._add_line(beat, key, lines)
        self.beats.append(beat)

    @staticmethod
    def _add_line(beat: dict[str, Any], key: str, lines: dict[str, str]) -> None:
        beat["keys"].append(key)
        for lang in ("en", "zh"):
            beat["narration"][lang].append(lines.get(lang, ""))

    def record_number(self, key: str, value: Any) -> None:
        """Record a number shown on screen in the current beat (the first one before any narration)."""
        (self.beats[-1]["numbers"] if self.beats else self._pending_numbers)[key] = value

    def to_dict(self) -> dict[str, Any]:
        """The record written as ``<Scene>.beats.json``: ``{"version", "scene", "lang", "duration", "beats": [...]}``;
        each beat has ``index, keys, narration {en, zh: [str]}, start, end`` (seconds) ``, numbers {key: value}``
        and ``section`` (its position among Manim's saved sections). A scene without narration has one beat."""
        end = float(self.scene.time)
        beats = [dict(b) for b in self.beats] or [{"index": 0, "keys": [], "narration": {"en": [], "zh": []},
                                                    "start": 0.0, "numbers": dict(self._pending_numbers),
                                                    "_section": None}]
        # A last narration after the last animation has an empty section, which Manim drops: fold it back.
        while len(beats) > 1 and beats[-1]["_section"] is not None and beats[-1]["_section"].is_empty():
            last = beats.pop()
            for key, en, zh in zip(last["keys"], last["narration"]["en"], last["narration"]["zh"]):
                self._add_line(beats[-1], key, {"en": en, "zh": zh})
            beats[-1]["numbers"].update(last["numbers"])
        beats[0]["start"] = 0.0  # the first beat holds what was drawn before the first narration
        for index, beat in enumerate(beats):
            beat.pop("_section")
            beat["index"] = beat["section"] = index
            beat["end"] = beats[index + 1]["start"] if index + 1 < len(beats) else end
        return {"version": BEATS_VERSION, "scene": type(self.scene).__name__, "lang": self.scene.lang,
                "duration": end, "beats": beats}
