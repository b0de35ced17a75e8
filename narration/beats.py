"""The beat record ``<Scene>.beats.json``: :class:`Beat` and :class:`BeatRecord`, its one writer and its one reader.

Example::

    record = BeatRecord.load(Path("media/480p15/en/IdentityHighway.beats.json"))
    [(beat.index, beat.start, beat.end, beat.lines("en")) for beat in record.beats]

A scene builds the record while it renders (:class:`scenes.kit.beats.BeatLog`: a beat per narration point, one Manim
section each) and writes it with :meth:`BeatRecord.write`; the slide deck (:mod:`cli.deck`) and the lecture page
(:mod:`cli.page`) read it with :meth:`BeatRecord.load`. Imports neither Manim nor torch, so that the deck and the
page read it without either.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from narration.text import LANGS
from simulation.atomic_io import atomic_write
from simulation.config import a_type

__all__ = ["Beat", "BeatRecord", "BeatRecordError", "BEATS_VERSION", "BEAT_LANGS", "jsonable"]

BEATS_VERSION = 1  # bump when the layout of <Scene>.beats.json changes


class BeatRecordError(ValueError):
    """A beat record that is missing, unreadable, or not of this layout (:data:`BEATS_VERSION`)."""


BEAT_LANGS = ("en", "zh")  # every beat record holds its lines in these, and in the language it was rendered in


def _no_lines() -> dict[str, list[str]]:
    return {lang: [] for lang in BEAT_LANGS}


@dataclass
class Beat:
    """One beat of a scene: a narration point, a slide, a Manim section. The fields are in the file's order."""

    index: int  # 0-based position among the scene's beats (the slide's number - 1)
    keys: list[str] = field(default_factory=list)  # the scene's string keys of its narration lines, in order
    narration: dict[str, list[str]] = field(default_factory=_no_lines)  # {lang: its lines}, one per key ("" if none)
    start: float = 0.0  # s into the scene's video
    numbers: dict[str, Any] = field(default_factory=dict)  # {key: value shown while it ran}; None: missing
    section: int = 0  # its Manim section: the beat video <Scene>.beat-NN.<format> (cli.media.beat_video_name)
    end: float = 0.0  # s into the scene's video

    def add_line(self, key: str, lines: Mapping[str, str]) -> None:
        """Append the narration line ``key``, given as {lang: text}; a language it lacks gets ""."""
        for lang in lines:
            self.narration.setdefault(lang, [""] * len(self.keys))
        self.keys.append(key)
        for lang in self.narration:
            self.narration[lang].append(lines.get(lang, ""))

    def lines(self, lang: str) -> list[str]:
        """Its narration lines in ``lang`` that are not empty, in order."""
        return [line for line in self.narration.get(lang, []) if line]

    def first_line(self, lang: str) -> str:
        """Its first narration line in ``lang`` ("" when it has none)."""
        return next(iter(self.narration.get(lang, [])), "")


@dataclass
class BeatRecord:
    """The beats of one rendered scene, as ``<Scene>.beats.json`` holds them (a scene without narration has one)."""

    scene: str  # the scene's class name
    lang: str  # the language it was rendered in
    duration: float  # s, the whole video
    beats: list[Beat]  # in order; each ends where the next starts
    version: int = BEATS_VERSION  # the file's layout

    def to_dict(self) -> dict[str, Any]:
        """``{"version", "scene", "lang", "duration", "beats": [{index, keys, narration, start, numbers, section,
        end}]}``, the file's layout."""
        return {"version": self.version, "scene": self.scene, "lang": self.lang, "duration": self.duration,
                "beats": [dict(vars(beat)) for beat in self.beats]}

    def write(self, path: Path) -> Path:
        """Write the record to ``path`` (UTF-8 JSON, indented, atomically); returns ``path``."""
        with atomic_write(Path(path)) as tmp:
            tmp.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=jsonable),
                           encoding="utf-8")
        return Path(path)

    @classmethod
    def from_dict(cls, data: Any) -> BeatRecord:
        """The record :meth:`to_dict` gave; BeatRecordError for another version, a missing or unknown field, or a
        field of the wrong type."""
        if not isinstance(data, dict):
            raise BeatRecordError(f"expected a JSON object, got {type(data).__name__}")
        if data.get("version") != BEATS_VERSION:
            raise BeatRecordError(f"layout version {data.get('version')!r}, this code reads {BEATS_VERSION}")
        _check(data, {"version": int, "scene": str, "lang": str, "duration": float, "beats": list}, "record")
        beats = []
        for n, beat in enumerate(data["beats"]):
            where = f"beat {n}"
            if not isinstance(beat, dict):
                raise BeatRecordError(f"{where} is {a_type(beat)}, not an object")
            _check(beat, {"index": int, "keys": list, "narration": dict, "start": float, "numbers": dict,
                          "section": int, "end": float}, where)
            if not all(isinstance(k, str) for k in beat["keys"]) or not all(
                    isinstance(v, list) and all(isinstance(s, str) for s in v) for v in beat["narration"].values()):
                raise BeatRecordError(f"{where}: keys and narration lines must be text")
            langs = {*BEAT_LANGS, data["lang"]}
            if not langs <= set(beat["narration"]) <= set(LANGS) or any(len(v) != len(beat["keys"])
                                                                        for v in beat["narration"].values()):
                raise BeatRecordError(f"{where}: narration must hold one line per key in each of "
                                      f"{', '.join(sorted(langs))}")
            beats.append(Beat(**beat))
        return cls(scene=data["scene"], lang=data["lang"], duration=data["duration"], beats=beats,
                   version=data["version"])

    @classmethod
    def load(cls, path: Path) -> BeatRecord:
        """The record at ``path``; BeatRecordError (saying which file and why) if it is missing, not JSON, or not
        a beat record of this layout."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BeatRecordError(f"beat record {path} is missing") from None
        except (OSError, ValueError) as exc:
            raise BeatRecordError(f"beat record {path} is unreadable ({exc})") from None
        try:
            return cls.from_dict(data)
        except BeatRecordError as exc:
            raise BeatRecordError(f"beat record {path} is unreadable ({exc})") from None


def _check(data: dict[str, Any], fields: dict[str, type], where: str) -> None:
    """BeatRecordError unless ``data`` has exactly ``fields``, each of its type (a float may be written as an int;
    a bool is no number)."""
    if set(data) != set(fields):
        raise BeatRecordError(f"{where}: fields {sorted(data)}, expected {sorted(fields)}")
    for name, kind in fields.items():
        value = data[name]
        ok = (_finite(value) if kind is float else isinstance(value, kind)) and not isinstance(value, bool)
        if not ok:
            raise BeatRecordError(f"{where}: {name} must be {kind.__name__}, got {value!r}")


def _finite(value: Any) -> bool:
    try:
        return isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an int beyond any float
        return False


def jsonable(value: Any) -> Any:
    """``json.dumps``'s ``default`` for the scene records: a numpy scalar as its Python number, an array as a
    list; TypeError for anything else."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to a scene record")
