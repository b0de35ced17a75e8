"""The command line with real renders: formats, the joined lecture, parallel jobs, two processes at once.

Marked slow (`pytest -m slow`); CI runs them. Videos are checked by metadata (size, rate, duration,
alpha), never by pixels.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import av
import pytest
import srt
from PIL import Image

import cli_scenes
import scenes
from simulation.trace import Trace
from support import ROOT, CLI_TINY, cli_env, invoke

pytestmark = pytest.mark.slow


def _video(path: Path) -> dict:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return {"size": (stream.width, stream.height), "rate": stream.average_rate, "codec": stream.codec_context.name,
                "seconds": container.duration / av.time_base, "alpha": stream.metadata.get("alpha_mode") == "1"}


def test_every_format(tmp_path):
    out = tmp_path / "out"
    folder = out / "480p15" / "en"
    for fmt, extra in (("mp4", []), ("webm", ["--transparent"]), ("gif", []), ("png", ["--transparent"])):
        result = invoke("render", "cli_scenes:TinySquare", "--format", fmt, *extra, "-o", out)
        assert result.exit_code == 0, result.output
        assert str(folder / f"TinySquare.{fmt}") in result.stdout.split("wrote:")[1]
    # 0.4 s of animation, held until its one line ("a square") can be read, in whole frames at 15 fps
    from narration import reading_time

    seconds = math.ceil(max(0.4, reading_time("a square", "en")) * 15 - 1e-6) / 15
    assert _video(folder / "TinySquare.mp4") == {"size": (854, 480), "rate": 15, "codec": "h264",
                                                 "seconds": pytest.approx(seconds, abs=0.07), "alpha": False}
    webm = _video(folder / "TinySquare.webm")
    assert webm["codec"] == "vp9" and webm["alpha"]
    with av.open(str(folder / "TinySquare.gif")) as container:
        assert container.format.name == "gif" and container.streams.video[0].width == 854
    still = Image.open(folder / "TinySquare.png")
    assert still.size == (854, 480) and still.mode == "RGBA" and still.getpixel((0, 0))[3] == 0  # transparent


def test_all_concat_joins_the_lecture_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(scenes, "SCENES_IN_ORDER", [cli_scenes.TinySquare, cli_scenes.TinyTrace])
    out = tmp_path / "out"
    first = invoke("all", "--concat", *CLI_TINY, "-o", out)
    assert first.exit_code == 0, first.output
    folder = out / "480p15" / "en"
    lecture = _video(folder / "lecture.mp4")
    parts = [_video(folder / f"{name}.mp4") for name in ("TinySquare", "TinyTrace")]
    assert lecture["size"] == parts[0]["size"]
    assert lecture["seconds"] == pytest.approx(sum(p["seconds"] for p in parts), abs=0.1)
    subtitles = list(srt.parse((folder / "lecture.srt").read_text()))
    assert [s.content for s in subtitles] == ["a square", "one number"]
    assert subtitles[1].start.total_seconds() == pytest.approx(parts[0]["seconds"], abs=0.07)  # shifted
    stamp = (folder / "lecture.mp4").stat().st_mtime_ns
    again = invoke("all", "--concat", *CLI_TINY, "-o", out)
    assert again.exit_code == 0 and "wrote: nothing" in again.stdout
    assert (folder / "lecture.mp4").stat().st_mtime_ns == stamp


def test_jobs_render_in_parallel_processes_and_report_failures(tmp_path, isolated_cache):
    out = tmp_path / "out"
    env = {"PYTHONPATH": str(ROOT / "tests")}
    result = invoke("render", "cli_scenes:TinySquare", "cli_scenes:TinyTrace", "cli_scenes:TinyStill", *CLI_TINY,
                    "--jobs", "3", "-o", out, env=env)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("Error: 1 of 3 scenes failed: TinyStill: ")
    folder = out / "480p15" / "en"
    clips = {p.name for p in folder.glob("*.mp4") if ".beat-" not in p.name}  # not the deck's beat videos
    assert clips == {"TinySquare.mp4", "TinyTrace.mp4"}
    assert str(folder / "TinyTrace.mp4") in result.stdout  # the files that were written are still listed
    assert not list(folder.glob(".render-*"))


def test_two_trainings_of_one_config_at_once_both_succeed(isolated_cache):
    command = [sys.executable, "render.py", "train", "chain_rule", *CLI_TINY, "--json"]
    procs = [subprocess.Popen(command, cwd=ROOT, env=cli_env(isolated_cache), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    summaries = [json.loads(out) for out, _ in outputs]
    assert summaries[0]["runs"] == summaries[1]["runs"]  # same numbers: one valid trace per run in the cache
    for run in summaries[0]["runs"].values():
        Trace.load(run["trace"])
    assert sorted(p.suffix for p in isolated_cache.iterdir()) == [".npz", ".npz"]  # no temporary file left


def test_two_renders_at_once_sharing_one_cache_both_succeed(tmp_path, isolated_cache):
    out = tmp_path / "out"
    command = [sys.executable, "render.py", "render", "IdentityHighway", "cli_scenes:TinyTrace", *CLI_TINY, "-o", str(out)]
    procs = [subprocess.Popen(command, cwd=ROOT, env=cli_env(isolated_cache), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=900) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    folder = out / "480p15" / "en"
    for name in ("IdentityHighway", "TinyTrace"):
        assert _video(folder / f"{name}.mp4")["seconds"] > 0.1
        numbers = json.loads((folder / f"{name}.numbers.json").read_text())
        assert numbers["scene"] == name
    assert not list(folder.glob(".render-*"))
    assert not [p for p in isolated_cache.rglob(".*") if p.is_file()]  # no half-promoted cache entry
    again = invoke("render", "IdentityHighway", "cli_scenes:TinyTrace", *CLI_TINY, "-o", out)
    assert again.exit_code == 0 and "wrote: nothing" in again.stdout  # the records of the winner are valid


def test_real_scenes_render_in_one_process_and_with_jobs(tmp_path):
    out = tmp_path / "out"
    names = [s.__name__ for s in scenes.SCENES_IN_ORDER[:2]]
    serial = invoke("render", *names, *CLI_TINY, "-o", out)
    assert serial.exit_code == 0, serial.output
    parallel = invoke("render", *names, *CLI_TINY, "-o", out, "--lang", "zh", "--jobs", "2")
    assert parallel.exit_code == 0, parallel.output
    for lang in ("en", "zh"):
        for name in names:
            assert _video(out / "480p15" / lang / f"{name}.mp4")["size"] == (854, 480)
            assert json.loads((out / "480p15" / lang / f"{name}.numbers.json").read_text())["lang"] == lang
