"""What a lecturer publishes names no folder of theirs: the explorer, the page and the deck built from runs read
from files (``--trace FILE --twin FILE``) keep a file's name and its digest, never an absolute path (cli/public.py).

The traces lie in a folder named :data:`MARKER`; every text file the commands write (html, js, json, vtt, srt) is
searched for it and for any absolute path. The page and the deck run the real commands (planning, the trace cache,
the render record) with the Manim render replaced by a tiny PyAV clip, so no scene is drawn (~3 s in all).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from support import invoke, tiny_frames, write_clip
from data.make_traces import user_like_trace_files

MARKER = "PrivateMarkerFolder"
TEXT_SUFFIXES = (".html", ".js", ".json", ".vtt", ".srt")
# An absolute POSIX path (two parts at least, after a quote, a space, "=" or a line start) or a home folder
ABSOLUTE = re.compile(r"""(?:^|[\s"'=(>])((?:/[^\s"'/<>]+){2,}|~/)""", re.MULTILINE)


def _vendored(path: Path) -> bool:
    """A file copied as it ships (reveal.js, the explorer's scripts): code whose regexes look like paths."""
    from cli.explore import WEB_DIR

    shipped = WEB_DIR / path.name
    return "reveal" in path.parts or (shipped.is_file() and shipped.read_bytes() == path.read_bytes())


def leaks(folder: Path, private: list[str]) -> list[str]:
    """Each text file under ``folder`` that names ``MARKER`` or one of ``private``, or (written, not vendored) an
    absolute path: "file: what"."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(TEXT_SUFFIXES)):
        text = path.read_text(encoding="utf-8")
        for word in [MARKER, *private]:
            if word in text:
                found.append(f"{path.relative_to(folder)}: {word}")
        if not _vendored(path):
            found += [f"{path.relative_to(folder)}: {m.group(1)}" for m in ABSOLUTE.finditer(text)]
    return found


@pytest.fixture
def private_runs(tmp_path):
    """The committed tiny user-like traces copied under tmp_path/PrivateMarkerFolder/runs."""
    folder = tmp_path / MARKER / "runs"
    folder.mkdir(parents=True)
    return {arch: shutil.copyfile(path, folder / f"{arch}.npz")
            for arch, path in user_like_trace_files("gpt2_24").items()}


def fake_render_job(job, scene, progress=False):
    """cli.media.render_job without Manim: a tiny clip, one beat, its subtitles and numbers, and the real render
    record (cli.media._write_record with the job's key inputs and sources)."""
    from cli.media import _write_record
    from narration.beats import Beat, BeatRecord

    final = job.final_dir
    final.mkdir(parents=True, exist_ok=True)
    files = [write_clip(job.primary, tiny_frames(6)), write_clip(final / f"{job.scene}.beat-00.mp4", tiny_frames(6))]
    BeatRecord(job.scene, job.lang, 0.4, [Beat(0, ["a"], {"en": ["a line"], "zh": ["一句"]}, 0.0, {}, 0, 0.4)]).write(
        final / f"{job.scene}.beats.json")
    (final / f"{job.scene}.srt").write_text("1\n00:00:00,000 --> 00:00:00,400\na line\n\n", encoding="utf-8")
    (final / f"{job.scene}.numbers.json").write_text(json.dumps({"values": {"ratio": 2.0}}), encoding="utf-8")
    files += [final / f"{job.scene}.{s}" for s in ("beats.json", "srt", "numbers.json")]
    return [*files, _write_record(job.primary, job.key(), job.key_inputs(), files, job.sources)]


def test_published_outputs_name_no_absolute_path(tmp_path, private_runs, isolated_cache, monkeypatch):
    """`explore`, `page` and `slides` of runs read from files: no written text file names the traces' folder, the
    trace cache, the home folder or any absolute path; the files are still named (their digests too)."""
    import cli.media

    monkeypatch.setattr(cli.media, "render_job", fake_render_job)
    out = tmp_path / "out"
    files = ["--trace", private_runs["residual"], "--twin", private_runs["plain"]]
    result = invoke("explore", *files, "-o", out / "explore")
    assert result.exit_code == 0, result.output
    for command in ("page", "slides"):
        result = invoke(command, "DepthTimeMap", *files, "-q", "l", "-o", out, "--jobs", "1")
        assert result.exit_code == 0, result.output
    private = [str(tmp_path), str(isolated_cache), os.path.expanduser("~")]
    assert leaks(out, private) == []
    # what a reader needs is still there: the file's name in the run's config, the digest of every trace
    data = (out / "explore" / "data.js").read_text(encoding="utf-8")
    assert '"path":"residual.npz"' in data and '"path":"plain.npz"' in data
    summary = json.loads((out / "480p15" / "en" / "page" / "traces" / "DepthTimeMap.json").read_text(encoding="utf-8"))
    for run in summary["runs"].values():
        assert (isolated_cache / run["trace"]).is_file() and run["trace"] == f"{run['digest']}.npz"
        assert run["meta"]["config"]["path"] in ("residual.npz", "plain.npz")
    page = (out / "480p15" / "en" / "page" / "lecture.html").read_text(encoding="utf-8")
    assert "&quot;residual.npz&quot;" in page  # the --trace parameter, by its name


def test_the_leak_check_finds_what_the_old_code_wrote(tmp_path, private_runs):
    """Tamper twin: the explorer's run config as the trace cache holds it (before cli.public) is caught."""
    from simulation.trace import Trace

    out = tmp_path / "leaky"
    out.mkdir()
    config = Trace.load(private_runs["residual"]).meta.config | {"path": str(private_runs["residual"])}
    (out / "data.js").write_text("window.EXPLORE_DATA = " + json.dumps({"config": config}) + ";\n", encoding="utf-8")
    (out / "t.json").write_text(json.dumps({"trace": "/var/cache/x/ab.npz"}), encoding="utf-8")
    assert sorted(leaks(out, [])) == sorted([f"data.js: {MARKER}", f"data.js: {private_runs['residual']}",
                                             "t.json: /var/cache/x/ab.npz"])


@pytest.mark.parametrize("text, expected", [
    ("/home/ada/runs/resnet.npz", "resnet.npz"),
    ("/home/ada/models/my_net.py:build", "my_net.py:build"),
    ("trace /tmp/x/run.npz is corrupt", "trace run.npz is corrupt"),
    ("~/runs/a.npz", "a.npz"),
    ("C:\\runs\\a.npz", "a.npz"),
    ("torchvision.models:resnet18", "torchvision.models:resnet18"),
    ("‖∂L/∂h‖ of layer1.0/conv", "‖∂L/∂h‖ of layer1.0/conv"),
    ("runs/mine.npz", "runs/mine.npz"),
    ("10 / 2", "10 / 2"),
])
def test_public_text_keeps_a_files_name(text, expected):
    from cli.public import public, public_text

    assert public_text(text) == expected and public_text(expected) == expected
    assert public({"a": [text, 1, None]}) == {"a": [expected, 1, None]}
