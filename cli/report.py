"""The end of a command's output: the files a user opens, one line for the rest, the time it took.

Example::

    python render.py all -q l          # ... wrote: the 20 clips, "and 170 beat clips, ... under media/480p15/en"
    python render.py -v all -q l       # every file

``render``/``all`` open clips (and stills, and the joined lecture), ``slides`` the deck (index.html, slides.pptx,
slides.pdf), ``page`` lecture.html, ``train`` the traces; the other files (beat clips, subtitles, records, a deck's
media folder ...) are counted by kind on one line, with the folder that holds them. ``--verbose`` lists every file.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

__all__ = ["KINDS", "file_kind", "report_lines", "format_duration"]

# kind -> (singular, plural), in the order the summary line names them
KINDS = {
    "clip": ("clip", "clips"), "still": ("still", "stills"), "deck": ("deck", "decks"), "page": ("page", "pages"),
    "trace": ("trace", "traces"), "beat clip": ("beat clip", "beat clips"),
    "subtitles": ("subtitle file", "subtitle files"), "record": ("record", "records"),
    "folder": ("folder", "folders"), "other": ("other file", "other files"),
}
_VIDEO = {".mp4", ".webm", ".mov", ".gif"}


def file_kind(path: Path) -> str:
    """One of :data:`KINDS` for a file a command wrote (by its name; a folder by what it is)."""
    name = path.name
    if ".beat-" in name:
        return "beat clip"
    if name in ("slides.pptx", "slides.pdf") or (name == "index.html" and path.parent.name == "slides"):
        return "deck"
    if name == "lecture.html" or name == "index.html":  # the lecture page, the explorer
        return "page"
    if name.endswith(".json"):  # .numbers.json, .beats.json, .render.json, a deck's beats.json
        return "record"
    suffix = path.suffix.lower()
    if suffix in _VIDEO:
        return "clip"
    if suffix == ".png":
        return "still"
    if suffix == ".srt":
        return "subtitles"
    if suffix == ".npz":
        return "trace"
    if path.is_dir():
        return "folder"
    return "other"


def format_duration(seconds: float) -> str:
    """``"12.3 s"``, ``"4 min 05 s"``, ``"1 h 02 min"``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _rest_line(rest: list[Path]) -> str:
    counts = Counter(file_kind(p) for p in rest)
    parts = [f"{counts[k]} {KINDS[k][0] if counts[k] == 1 else KINDS[k][1]}" for k in KINDS if counts[k]]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    folder = Path(os.path.commonpath([str(p.parent) for p in rest]))
    return f"and {listed} under {folder}"


def _section(heading: str, files: list[Path], opens: set[str], verbose: bool) -> list[str]:
    shown = files if verbose else [p for p in files if file_kind(p) in opens]
    rest = [] if verbose else [p for p in files if file_kind(p) not in opens]
    lines = [heading, *(f"  {p}" for p in shown)]
    if rest:
        lines.append(f"  {_rest_line(rest)}")
    return lines


def report_lines(written: list[Path], unchanged: list[Path], opens: set[str], verbose: bool,
                 unchanged_heading: str = "up to date (not rendered again):") -> list[str]:
    """The listing a command ends with (stdout): files it left as they were, then files it wrote; in each, the
    files of the kinds in ``opens`` one a line and the others summed up on one line (all of them one a line
    with ``verbose``). ``wrote: nothing`` when it wrote nothing."""
    unknown = opens - set(KINDS)
    if unknown:
        raise ValueError(f"unknown file kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    lines = _section(unchanged_heading, list(unchanged), opens, verbose) if unchanged else []
    return lines + (_section("wrote:", list(written), opens, verbose) if written else ["wrote: nothing"])
