"""Beats: the narration points of a scene as slide stops, on top of Manim's own sections.

Example::

    python render.py slides IdentityHighway --format html     # one slide per beat

Every :meth:`LectureScene.narrate` starts a beat. A beat is one Manim section (``Scene.next_section``), so with
``save_sections`` Manim writes each beat's video segment itself (concatenated from the same cached partial
movies as the whole video: no second render, no second copy of the scene code). The first beat also holds
whatever was drawn before the first narration; a narration followed by no animation joins the next one (Manim
drops empty sections). The record, ``<Scene>.beats.json`` beside the video, holds per beat its narration
lines in English and Chinese, its start and end in seconds of the scene's video, and the numbers
:meth:`LectureScene.number` recorded while it ran: a :class:`narration.beats.BeatRecord` of :class:`narration.beats.Beat`,
the one type the scenes write and the deck and the page read.
"""

from __future__ import annotations

import copy
from typing import Any

from narration.beats import Beat, BeatRecord

__all__ = ["BeatLog"]


class BeatLog:
    """The beats of one scene being rendered; ``scene`` is the :class:`manim.Scene` (read for time and sections)."""

    def __init__(self, scene: Any) -> None:
        self.scene = scene
        self.beats: list[Beat] = []
        self._sections: list[Any] = []  # the Manim section of each beat (None without a file writer)
        self._pending_numbers: dict[str, Any] = {}  # numbers recorded before the first narration

    def _writer(self) -> Any:
        return getattr(getattr(self.scene, "renderer", None), "file_writer", None)

    def begin(self, key: str, lines: dict[str, str]) -> None:
        """Start a beat at the scene's current time, narrated by ``lines`` ({"en": ..., "zh": ...})."""
        writer = self._writer()
        sections = getattr(writer, "sections", None)
        if self.beats and sections and sections[-1].is_empty():
            # Nothing was animated since the last narration: one stop, both lines.
            self.beats[-1].add_line(key, lines)
            return
        if self.beats and sections is not None:
            self.scene.next_section(f"beat {len(self.beats):02d} {key}")
        beat = Beat(index=len(self.beats), start=float(self.scene.time), numbers=dict(self._pending_numbers))
        self._pending_numbers.clear()
        beat.add_line(key, lines)
        self.beats.append(beat)
        self._sections.append(sections[-1] if sections else None)

    def record_number(self, key: str, value: Any) -> None:
        """Record a number shown on screen in the current beat (the first one before any narration)."""
        (self.beats[-1].numbers if self.beats else self._pending_numbers)[key] = value

    def record(self) -> BeatRecord:
        """The record written as ``<Scene>.beats.json``: each beat's ``start`` and ``end`` (seconds) and
        ``section`` (its position among Manim's saved sections). A scene without narration has one beat."""
        end = float(self.scene.time)
        beats = copy.deepcopy(self.beats) or [Beat(index=0, numbers=dict(self._pending_numbers))]
        sections = list(self._sections) or [None]
        # A last narration after the last animation has an empty section, which Manim drops: fold it back.
        while len(beats) > 1 and sections[-1] is not None and sections[-1].is_empty():
            last = beats.pop()
            sections.pop()
            for key, *lines in zip(last.keys, *last.narration.values()):
                beats[-1].add_line(key, dict(zip(last.narration, lines)))
            beats[-1].numbers.update(last.numbers)
        beats[0].start = 0.0  # the first beat holds what was drawn before the first narration
        for index, beat in enumerate(beats):
            beat.index = beat.section = index
            beat.end = beats[index + 1].start if index + 1 < len(beats) else end
        return BeatRecord(scene=type(self.scene).__name__, lang=self.scene.lang, duration=end, beats=beats)
