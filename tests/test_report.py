"""The end of a command's output (cli/report.py): the files to open, one line for the rest, the time it took."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.report import file_kind, format_duration, report_lines
from render import cli


def _lecture_files(folder: Path, scenes: int, beats: int) -> list[Path]:
    files = []
    for n in range(scenes):
        files.append(folder / f"S{n}.mp4")
        files += [folder / f"S{n}.beat-{b:02d}.mp4" for b in range(beats)]
        files += [folder / f"S{n}.srt", folder / f"S{n}.numbers.json", folder / f"S{n}.beats.json",
                  folder / f"S{n}.mp4.render.json"]
    return files


def test_a_long_run_lists_the_clips_and_sums_up_the_rest(tmp_path):
    """20 scenes of 8 beats: 20 clip lines and one line for the 160 beat clips, 20 subtitles and 60 records."""
    folder = tmp_path / "480p15" / "en"
    files = _lecture_files(folder, 20, 8)
    lines = report_lines(files, [], {"clip", "still"}, verbose=False)
    assert lines[0] == "wrote:" and lines[1:21] == [f"  {folder / f'S{n}.mp4'}" for n in range(20)]
    assert lines[21:] == [f"  and 160 beat clips, 20 subtitle files and 60 records under {folder}"]
    every = report_lines(files, [], {"clip", "still"}, verbose=True)
    assert every == ["wrote:", *(f"  {p}" for p in files)]


def test_files_left_as_they_were_come_first_and_nothing_written_says_so(tmp_path):
    folder = tmp_path / "en"
    deck = [folder / "slides" / "index.html", folder / "slides" / "beats.json", folder / "slides" / "media"]
    (folder / "slides" / "media").mkdir(parents=True)
    lines = report_lines(deck, _lecture_files(folder, 2, 1), {"deck"}, verbose=False)
    assert lines == ["up to date (not rendered again):", f"  and 2 clips, 2 beat clips, 2 subtitle files and 6 records "
                     f"under {folder}", "wrote:", f"  {folder / 'slides' / 'index.html'}",
                     f"  and 1 record and 1 folder under {folder / 'slides'}"]
    assert report_lines([], [folder / "a.npz"], {"trace"}, False, "from the cache:") == [
        "from the cache:", f"  {folder / 'a.npz'}", "wrote: nothing"]
    with pytest.raises(ValueError, match="unknown file kinds"):
        report_lines([], [], {"clips"}, False)


@pytest.mark.parametrize("name,kind", [
    ("A.mp4", "clip"), ("lecture.mp4", "clip"), ("A.webm", "clip"), ("A.png", "still"), ("A.beat-03.mp4", "beat clip"),
    ("A.beat-03.webm", "beat clip"), ("A.srt", "subtitles"), ("A.numbers.json", "record"), ("A.mp4.render.json", "record"),
    ("slides.pptx", "deck"), ("slides.pdf", "deck"), ("lecture.html", "page"), ("abc.npz", "trace")])
def test_file_kinds(tmp_path, name, kind):
    assert file_kind(tmp_path / name) == kind


def test_durations():
    assert [format_duration(s) for s in (3.04, 59.94, 125, 3725)] == ["3.0 s", "59.9 s", "2 min 05 s", "1 h 02 min"]


def test_render_ends_with_the_clip_a_summary_line_and_the_time_and_verbose_lists_every_file(tmp_path):
    """The command line: a tiny scene rendered, then again with -v (up to date: every file listed)."""
    out = tmp_path / "out"
    folder = out / "480p15" / "en"
    first = CliRunner().invoke(cli, ["render", "cli_scenes:TinySquare", "-o", str(out)])
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[-2:] == [f"  {folder / 'TinySquare.mp4'}",
                                              f"  and 1 beat clip, 1 subtitle file and 3 records under {folder}"]
    assert first.stderr.splitlines()[-1].startswith("done in ") and "every file: render.py -v" in first.stderr
    again = CliRunner().invoke(cli, ["-v", "render", "cli_scenes:TinySquare", "-o", str(out)])
    assert again.exit_code == 0, again.output
    listed = [line.strip() for line in again.stdout.splitlines() if line.startswith("  ")]
    on_disk = sorted(str(p) for p in folder.iterdir())
    assert len(on_disk) == 6  # clip, beat clip, .srt, numbers, beats, render record (not listed: the key, not output)
    assert sorted(listed) == [p for p in on_disk if not p.endswith(".render.json")]
    assert again.stdout.splitlines()[-1] == "wrote: nothing"
    assert "every file" not in again.stderr.splitlines()[-1]
