"""benchmarks/compare_renders.py on tiny folders: identical copies pass, and each kind of tampering is caught.

The clips are a few 64x48 frames written with PyAV (support.write_clip: intra-only, so a change to one frame changes
that frame only); no scene is rendered.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.compare_renders import compare_dirs, compare_videos, main

from support import tiny_frames, write_clip

ROOT = Path(__file__).resolve().parent.parent


def _render_dir(root: Path) -> Path:
    """A folder laid out as ``render.py`` writes one: a clip, a beat clip, numbers, subtitles, beats, a record."""
    folder = root / "480p15" / "en"
    folder.mkdir(parents=True)
    write_clip(folder / "Tiny.mp4", tiny_frames())
    write_clip(folder / "Tiny.beat-00.mp4", tiny_frames(3))
    (folder / "Tiny.numbers.json").write_text(json.dumps({"values": {"loss": 0.25}}))
    (folder / "Tiny.srt").write_text("1\n00:00:00,000 --> 00:00:01,000\nhello\n")
    (folder / "Tiny.beats.json").write_text(json.dumps({"beats": [{"index": 0, "start": 0.0, "end": 0.4}]}))
    record = {"files": {"Tiny.mp4": [1, 2]}, "key": "k1",
              "inputs": {"scene": "Tiny", "source": "aaaa", "traces": {"plain": "0123456789abcdef"}}}
    (folder / "Tiny.mp4.render.json").write_text(json.dumps(record))
    return root


@pytest.fixture
def pair(tmp_path) -> tuple[Path, Path]:
    old = _render_dir(tmp_path / "old")
    new = tmp_path / "new"
    shutil.copytree(old, new)
    return old, new


def test_an_identical_copy_passes_and_counts_every_frame(pair):
    report = compare_dirs(*pair)
    assert report.identical, report.differences
    assert (report.clips, report.frames, report.files) == (2, 9, 4)


def test_a_clip_with_other_bytes_but_the_same_frames_passes(pair):
    from cli.deck import web_ready

    old, new = pair
    clip = new / "480p15/en/Tiny.mp4"
    web_ready(old / "480p15/en/Tiny.mp4", clip)  # the index moved before the media: other bytes, same frames
    assert clip.read_bytes() != (old / "480p15/en/Tiny.mp4").read_bytes()
    assert compare_dirs(old, new).identical


def test_one_changed_frame_is_found_with_its_index_and_difference(pair):
    old, new = pair
    frames = tiny_frames()
    frames[4][10:30, 20:40] = 255 - frames[4][10:30, 20:40]
    write_clip(new / "480p15/en/Tiny.mp4", frames)
    count, problem = compare_videos(old / "480p15/en/Tiny.mp4", new / "480p15/en/Tiny.mp4")
    assert count == 6 and problem.startswith("first differing frame 4,")
    assert int(problem.split("difference ")[1].split()[0]) > 50
    assert main([str(old), str(new)]) == 1


def test_a_dropped_frame_is_a_difference(pair):
    old, new = pair
    write_clip(new / "480p15/en/Tiny.beat-00.mp4", tiny_frames(2))
    report = compare_dirs(old, new)
    assert report.differences == ["480p15/en/Tiny.beat-00.mp4: 3 frames -> 2 frames"]


@pytest.mark.parametrize("name", ["Tiny.numbers.json", "Tiny.srt", "Tiny.beats.json"])
def test_one_changed_byte_in_a_record_is_a_difference(pair, name):
    old, new = pair
    path = new / "480p15/en" / name
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))
    assert [line.split(":")[0] for line in compare_dirs(old, new).differences] == [f"480p15/en/{name}"]


def test_missing_and_extra_files_are_differences_and_ignore_leaves_them_out(pair):
    old, new = pair
    (new / "480p15/en/Tiny.srt").unlink()
    (new / "480p15/en/Other.numbers.json").write_text("{}")
    assert compare_dirs(old, new).differences == [f"480p15/en/Tiny.srt: missing in {new}",
                                                  f"480p15/en/Other.numbers.json: extra in {new}"]
    assert compare_dirs(old, new, ignore=("*.srt", "*/Other.*")).identical


def test_a_render_record_differs_on_its_traces_not_on_its_source_digest(pair):
    old, new = pair
    path = new / "480p15/en/Tiny.mp4.render.json"
    record = json.loads(path.read_text())
    record["inputs"]["source"], record["key"], record["files"] = "bbbb", "k2", {}  # any code edit changes these
    path.write_text(json.dumps(record))
    assert compare_dirs(old, new).identical
    record["inputs"]["traces"]["plain"] = "fedcba9876543210"
    path.write_text(json.dumps(record))
    assert compare_dirs(old, new).differences == [
        '480p15/en/Tiny.mp4.render.json: input traces: {"plain": "0123456789abcdef"} -> {"plain": "fedcba9876543210"}']


def test_the_command_exits_0_1_2(pair, tmp_path):
    old, new = pair
    run = [sys.executable, "-m", "benchmarks.compare_renders"]
    same = subprocess.run([*run, str(old), str(new)], cwd=ROOT, capture_output=True, text=True)
    assert same.returncode == 0 and "2 clips (9 frames) and 4 other files compared: identical" in same.stdout
    (new / "480p15/en/Tiny.srt").write_text("changed\n")
    changed = subprocess.run([*run, str(old), str(new)], cwd=ROOT, capture_output=True, text=True)
    assert changed.returncode == 1 and "Tiny.srt: bytes differ" in changed.stdout
    bad = subprocess.run([*run, str(old), str(tmp_path / "nowhere")], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().endswith("is not a folder") and not bad.stdout
