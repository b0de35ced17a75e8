"""Before/after check of two render folders: every clip frame for frame, every other file byte for byte.

Example::

    python -m benchmarks.compare_renders /tmp/before /tmp/after      # exit 0: identical; 1: differences; 2: bad input

Pairs the files of ``OLD_DIR`` and ``NEW_DIR`` by their path below each (``480p15/en/IdentityHighway.mp4`` ...):

- a video (``.mp4``, ``.webm``, beat clips included) is decoded with PyAV (the one Manim writes with); the two must
  have the same number of video frames, the same timestamps and identical pixel arrays (decoded in the stream's own
  pixel format, so no colour conversion hides a change), and identical decoded sound where there is sound. A
  difference is reported with the first differing frame and the largest absolute pixel difference;
- a render record (``<Scene>.mp4.render.json``) is compared on its inputs without ``source``: its file stamps,
  its key and the scene source's digest change with every edit of the code by design; the trace digests it names
  must not;
- every other file (``.numbers.json``, ``.srt``, ``.beats.json``, a deck's ``index.html`` and ``beats.json``, the
  page's ``lecture.html`` ...) must be byte for byte the same.

A file in one folder only is a difference (missing or extra). ``--ignore GLOB`` (repeatable) leaves out paths
matching a glob (e.g. ``'*.log'``). Prints one line per difference and a summary line with the counts.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Iterator

import av
import numpy as np

__all__ = ["VIDEO_SUFFIXES", "RECORD_SUFFIX", "Report", "compare_dirs", "compare_videos", "compare_records", "main"]

VIDEO_SUFFIXES = (".mp4", ".webm")
RECORD_SUFFIX = ".render.json"  # as cli.media.RECORD_SUFFIX (not imported: this module must not need the app)
_RECORD_VOLATILE = ("source",)  # inputs of a render record that change with any edit of the code


@dataclass
class Report:
    """What :func:`compare_dirs` found. ``differences``: one line per differing, missing or extra file."""

    clips: int = 0  # videos compared
    frames: int = 0  # video frames compared (in the old folder's clips)
    files: int = 0  # other files compared (byte for byte, or render records on their inputs)
    differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        verdict = "identical" if self.identical else f"{len(self.differences)} difference(s)"
        return f"{self.clips} clips ({self.frames} frames) and {self.files} other files compared: {verdict}"


def _frames(path: Path) -> Iterator[tuple[int | None, np.ndarray]]:
    """(pts, pixel array) of every video frame of ``path``, in the stream's own pixel format (yuv420p for
    Manim's mp4) so that no colour conversion hides a change; RGBA for a format numpy cannot hold as is."""
    with av.open(str(path)) as container:
        for frame in container.decode(container.streams.video[0]):
            try:
                pixels = frame.to_ndarray()
            except ValueError:  # a pixel format PyAV does not convert to one array
                pixels = frame.to_ndarray(format="rgba")
            yield frame.pts, pixels


def _sound(path: Path) -> np.ndarray | None:
    """The decoded sound of ``path``, float or int array [channels, samples]; None when it has none."""
    with av.open(str(path)) as container:
        if not container.streams.audio:
            return None
        chunks = [frame.to_ndarray() for frame in container.decode(container.streams.audio[0])]
    return np.concatenate([c.reshape(c.shape[0], -1) for c in chunks], axis=1) if chunks else np.zeros((0, 0))


def compare_videos(old: Path, new: Path) -> tuple[int, str | None]:
    """(video frames of ``old``, None when ``new`` decodes to the same frames, timestamps and sound, else one line
    saying how they differ: the frame counts, the first differing frame (0-based) and the largest absolute
    pixel difference over the frames both have, a timestamp, or the sound)."""
    count = n_new = worst = 0
    first = moved = None
    try:
        for a, b in zip_longest(_frames(old), _frames(new)):
            count, n_new = count + (a is not None), n_new + (b is not None)
            if a is None or b is None:
                continue
            (pts_a, pix_a), (pts_b, pix_b) = a, b
            if pix_a.shape != pix_b.shape:
                return count, f"frame {count - 1}: shape {pix_a.shape} -> {pix_b.shape}"
            diff = int(np.abs(pix_a.astype(np.int64) - pix_b.astype(np.int64)).max(initial=0))
            if diff and first is None:
                first = count - 1
            worst = max(worst, diff)
            if pts_a != pts_b and moved is None:
                moved = f"frame {count - 1}: timestamp {pts_a} -> {pts_b}"
        sound_a, sound_b = _sound(old), _sound(new)
    except (av.error.FFmpegError, IndexError) as exc:  # IndexError: no video stream
        return count, f"cannot decode: {exc}"
    pixels = f"first differing frame {first}, max abs pixel difference {worst}" if first is not None else None
    if count != n_new:
        return count, f"{count} frames -> {n_new} frames" + (f" ({pixels})" if pixels else "")
    if pixels or moved:
        return count, f"{pixels} of {count} frames" if pixels else moved
    if (sound_a is None) != (sound_b is None):
        return count, "sound " + ("removed" if sound_b is None else "added")
    if sound_a is not None and not np.array_equal(sound_a, sound_b):
        return count, (f"sound: shape {sound_a.shape} -> {sound_b.shape}" if sound_a.shape != sound_b.shape else
                       f"sound: max abs sample difference {float(np.abs(sound_a - sound_b).max()):.3g}")
    return count, None


def compare_records(old: Path, new: Path) -> str | None:
    """None when two render records hold the same inputs (``source`` aside), else the first differing input."""
    try:
        a, b = (json.loads(p.read_text(encoding="utf-8")).get("inputs", {}) for p in (old, new))
    except (OSError, ValueError) as exc:
        return f"unreadable render record ({exc})"
    for key in sorted(set(a) | set(b)):
        if key not in _RECORD_VOLATILE and a.get(key) != b.get(key):
            return f"input {key}: {json.dumps(a.get(key))} -> {json.dumps(b.get(key))}"
    return None


def _files(root: Path, ignore: tuple[str, ...]) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and not any(fnmatch.fnmatch(p.relative_to(root).as_posix(), g) for g in ignore)}


def compare_dirs(old: Path, new: Path, ignore: tuple[str, ...] = ()) -> Report:
    """Compare every file below ``old`` with the file at the same path below ``new`` (see the module's text).
    ValueError if either is not a folder."""
    for root in (old, new):
        if not Path(root).is_dir():
            raise ValueError(f"{root} is not a folder")
    old, new = Path(old), Path(new)
    before, after = _files(old, ignore), _files(new, ignore)
    report = Report()
    report.differences += [f"{name}: missing in {new}" for name in sorted(before - after)]
    report.differences += [f"{name}: extra in {new}" for name in sorted(after - before)]
    for name in sorted(before & after):
        a, b = old / name, new / name
        if name.endswith(RECORD_SUFFIX):
            report.files += 1
            problem = compare_records(a, b)
        elif name.endswith(VIDEO_SUFFIXES):
            report.clips += 1
            frames, problem = compare_videos(a, b)
            report.frames += frames
        else:
            report.files += 1
            problem = None if a.read_bytes() == b.read_bytes() else (
                f"bytes differ ({a.stat().st_size} -> {b.stat().st_size} bytes)")
        if problem:
            report.differences.append(f"{name}: {problem}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old", type=Path, metavar="OLD_DIR")
    parser.add_argument("new", type=Path, metavar="NEW_DIR")
    parser.add_argument("--ignore", action="append", default=[], metavar="GLOB",
                        help="leave out paths (relative, posix) matching GLOB; repeatable")
    args = parser.parse_args(argv)
    try:
        report = compare_dirs(args.old, args.new, tuple(args.ignore))
    except ValueError as exc:
        print(f"compare_renders: {exc}", file=sys.stderr)
        return 2
    for line in report.differences:
        print(line)
    print(report.summary())
    return 0 if report.identical else 1


if __name__ == "__main__":
    sys.exit(main())
